"""Functions that write output and fail, for the tests of what a caller sees."""

import time


def ticks(n, pause=0.0):
    for i in range(n):
        print("tick %d" % i, flush=True)
        time.sleep(pause)
    return n


def inner_lookup(table, key):
    return table[key]


def missing_key():
    print("looking up", flush=True)
    return inner_lookup({}, "missing")
