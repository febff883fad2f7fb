"""The fake GCS FUSE CSI driver's mounter (standard library only).

Started by the fake kubelet in a user and mount namespace of the pod's
container (``unshare --map-root-user --mount``):

    python3 gcsfuse_mounter.py --endpoint URL \
        [--volume NAME BUCKET ONLY_DIR CACHE TARGET]... -- COMMAND...

For each volume it lists the bucket's objects under ``ONLY_DIR/`` (the
whole bucket when empty) over the GCS XML API at ``URL``, writes them under
``CACHE`` with their paths relative to ``ONLY_DIR``, bind-mounts ``CACHE``
at ``TARGET`` read-only, then replaces itself with ``COMMAND``. A volume
it cannot fill fails the container with the driver's message.
"""

import os
import subprocess
import sys
import urllib.parse
import urllib.request
from xml.etree import ElementTree


def names(endpoint, bucket, prefix):
    token = None
    while True:
        query = [("list-type", "2"), ("prefix", prefix)]
        if token:
            query.append(("continuation-token", token))
        url = "%s/%s?%s" % (endpoint, bucket, urllib.parse.urlencode(query, quote_via=urllib.parse.quote))
        with urllib.request.urlopen(url, timeout=60) as resp:
            root = ElementTree.fromstring(resp.read())
        token, truncated = None, False
        for element in root:
            tag = element.tag.rsplit("}", 1)[-1]
            if tag == "Contents":
                for child in element:
                    if child.tag.rsplit("}", 1)[-1] == "Key" and child.text:
                        yield child.text
            elif tag == "IsTruncated":
                truncated = (element.text or "").strip().lower() == "true"
            elif tag == "NextContinuationToken":
                token = element.text
        if not truncated or not token:
            return


def fill(endpoint, bucket, only_dir, cache):
    prefix = only_dir.strip("/") + "/" if only_dir.strip("/") else ""
    os.makedirs(cache, exist_ok=True)
    real = os.path.realpath(cache)
    for name in names(endpoint, bucket, prefix):
        rel = name[len(prefix):]
        if not rel or rel.endswith("/"):
            continue
        dest = os.path.realpath(os.path.join(cache, *rel.split("/")))
        if not dest.startswith(real + os.sep):
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        url = "%s/%s/%s" % (endpoint, bucket, urllib.parse.quote(name, safe="/"))
        with urllib.request.urlopen(url, timeout=60) as resp, open(dest, "wb") as out:
            out.write(resp.read())


def main(argv):
    sep = argv.index("--")
    opts, command = argv[:sep], argv[sep + 1:]
    endpoint = opts[opts.index("--endpoint") + 1].rstrip("/")
    i = 0
    while i < len(opts):
        if opts[i] != "--volume":
            i += 1
            continue
        name, bucket, only_dir, cache, target = opts[i + 1:i + 6]
        i += 6
        try:
            fill(endpoint, bucket, only_dir, cache)
            os.makedirs(target, exist_ok=True)
            subprocess.run(["mount", "--bind", "-o", "ro", cache, target], check=True)
        except Exception as e:  # noqa: BLE001 - reported as the driver reports a failed mount
            sys.stderr.write("MountVolume.SetUp failed for volume %r : rpc error: code = Internal desc = "
                             "gcsfuse failed to mount bucket %r: %s\n" % (name, bucket, e))
            return 1
    os.execvp(command[0], command)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
