//! `pods/{name}/portforward` as the API server and kubelet serve it over a
//! WebSocket: the upgrade with the channel subprotocol the client offers
//! (`v4.channel.k8s.io`, or none), two channels per asked port (data `2i`,
//! error `2i + 1`), each opened by a frame holding the port as two bytes,
//! little-endian; then every binary message is its channel's byte and the
//! bytes. The kubelet dials the port at the pod's IP (each fake pod has its
//! own loopback address); when nothing listens it writes `error forwarding
//! port …` on the port's error channel. The connection closes when every
//! port's pod side has closed, or when the client closes it.
//!
//! Refusals, as the real server's: a missing pod is 404; one without a node
//! `pod … does not have a host assigned` (400); one that is not running
//! `unable to upgrade connection: pod does not exist` (500, the kubelet's
//! answer relayed); no `ports` query parameter, or a bad port, 400; a
//! request without the WebSocket upgrade `Upgrade request required` (400);
//! only subprotocols it does not speak, 400.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use futures_util::{SinkExt, StreamExt};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::WebSocketStream;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;

use super::store::ApiError;

/// The subprotocol of binary channels (the kubelet also speaks a base64
/// variant, which this fake does not).
pub(crate) const V4_CHANNEL: &str = "v4.channel.k8s.io";

/// What a port-forward request asks for, once checked against the pod.
#[derive(Debug)]
pub(crate) struct Target {
    /// `{namespace}/{name}`, for error messages.
    pub(crate) pod: String,
    /// The pod's uid.
    pub(crate) uid: String,
    /// The pod's IP.
    pub(crate) ip: String,
    /// The ports, in the order asked.
    pub(crate) ports: Vec<u16>,
}

/// The `ports` query parameter: comma-separated ports, at least one.
pub(crate) fn parse_ports(query: Option<&str>) -> Result<Vec<u16>, ApiError> {
    let text = query.unwrap_or_default();
    let mut ports = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let port: u16 = part.parse().map_err(|e| {
            ApiError::bad_request(format!("unable to parse \"{part}\" as a port: {e}"))
        })?;
        if port == 0 {
            return Err(ApiError::bad_request(format!(
                "port \"{part}\" must be > 0"
            )));
        }
        ports.push(port);
    }
    if ports.is_empty() {
        return Err(ApiError::bad_request("at least one port must be specified"));
    }
    Ok(ports)
}

/// Check the pod as the API server and the kubelet do.
pub(crate) fn target(pod: &Value, ports: Vec<u16>) -> Result<Target, ApiError> {
    let name = pod
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let ns = pod
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let node = pod
        .pointer("/spec/nodeName")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if node.is_empty() {
        return Err(ApiError::bad_request(format!(
            "pod {name} does not have a host assigned"
        )));
    }
    let phase = pod.pointer("/status/phase").and_then(Value::as_str);
    let ip = pod
        .pointer("/status/podIP")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if phase != Some("Running") || ip.is_empty() {
        return Err(ApiError::new(
            500,
            "InternalError",
            "unable to upgrade connection: pod does not exist",
        ));
    }
    Ok(Target {
        pod: format!("{ns}/{name}"),
        uid: pod
            .pointer("/metadata/uid")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
        ip: ip.to_owned(),
        ports,
    })
}

/// The subprotocol to answer with: the first the client offers that this
/// server speaks (`""` when it offers none: binary channels).
pub(crate) fn choose_protocol(headers: &HeaderMap) -> Result<&'static str, ApiError> {
    let offered: Vec<String> = headers
        .get_all(header::SEC_WEBSOCKET_PROTOCOL)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|p| p.trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect();
    if offered.is_empty() {
        return Ok("");
    }
    if offered.iter().any(|p| p == V4_CHANNEL) {
        return Ok(V4_CHANNEL);
    }
    Err(ApiError::bad_request(format!(
        "requested protocol(s) are not supported: {offered:?}; supports [\"{V4_CHANNEL}\"]"
    )))
}

/// Answer the upgrade (101) and serve the session on the upgraded
/// connection; or refuse a request that is no WebSocket upgrade.
pub(crate) fn upgrade(mut req: Request, target: Target) -> Result<Response, ApiError> {
    let headers = req.headers();
    let is_ws = headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"));
    let key = headers.get(header::SEC_WEBSOCKET_KEY).cloned();
    let (true, Some(key)) = (is_ws, key) else {
        return Err(ApiError::bad_request("Upgrade request required"));
    };
    let protocol = choose_protocol(headers)?;
    let on_upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        match on_upgrade.await {
            Ok(upgraded) => {
                let io = hyper_util::rt::TokioIo::new(upgraded);
                let ws = WebSocketStream::from_raw_socket(io, Role::Server, None).await;
                serve(ws, target).await;
            }
            Err(e) => tracing::debug!("port-forward upgrade failed: {e}"),
        }
    });
    let mut response = Response::builder()
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header(header::CONNECTION, "Upgrade")
        .header(header::UPGRADE, "websocket")
        .header(
            header::SEC_WEBSOCKET_ACCEPT,
            derive_accept_key(key.as_bytes()),
        );
    if !protocol.is_empty() {
        response = response.header(header::SEC_WEBSOCKET_PROTOCOL, protocol);
    }
    response
        .body(Body::empty())
        .map_err(|e| ApiError::new(500, "InternalError", e.to_string()))
}

/// A frame of channel `channel`.
fn frame(channel: u8, bytes: &[u8]) -> Message {
    let mut data = Vec::with_capacity(bytes.len() + 1);
    data.push(channel);
    data.extend_from_slice(bytes);
    Message::binary(data)
}

/// One port-forward session over an accepted WebSocket.
pub(crate) async fn serve<S>(ws: WebSocketStream<S>, target: Target)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut incoming) = ws.split();
    // Each channel opens with its port.
    for (i, port) in target.ports.iter().enumerate() {
        let Ok(ch) = u8::try_from(2 * i) else { return };
        for channel in [ch, ch + 1] {
            if sink
                .send(frame(channel, &port.to_le_bytes()))
                .await
                .is_err()
            {
                return;
            }
        }
    }
    let (from_pod, mut to_client) = mpsc::channel::<(u8, Option<Vec<u8>>)>(16);
    let mut writers: Vec<Option<tokio::net::tcp::OwnedWriteHalf>> = Vec::new();
    let mut open = 0usize;
    for (i, port) in target.ports.iter().enumerate() {
        let ch = (2 * i) as u8;
        match TcpStream::connect((target.ip.as_str(), *port)).await {
            Ok(stream) => {
                let (mut read, write) = stream.into_split();
                writers.push(Some(write));
                open += 1;
                let tx = from_pod.clone();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 32 * 1024];
                    loop {
                        match read.read(&mut buf).await {
                            Ok(0) | Err(_) => {
                                let _ = tx.send((ch, None)).await;
                                return;
                            }
                            Ok(n) => {
                                if tx.send((ch, Some(buf[..n].to_vec()))).await.is_err() {
                                    return;
                                }
                            }
                        }
                    }
                });
            }
            Err(e) => {
                writers.push(None);
                let message = format!(
                    "error forwarding port {port} to pod {}, uid {}: dial tcp4 {}:{port}: {e}",
                    target.pod, target.uid, target.ip
                );
                let _ = sink.send(frame(ch + 1, message.as_bytes())).await;
            }
        }
    }
    drop(from_pod);
    if open == 0 {
        let _ = sink.send(Message::Close(None)).await;
        return;
    }
    loop {
        tokio::select! {
            message = incoming.next() => match message {
                Some(Ok(Message::Binary(data))) if !data.is_empty() => {
                    let ch = usize::from(data[0]);
                    // Data channels carry bytes to the pod; what a client
                    // writes on an error channel is ignored.
                    if ch % 2 == 0 && let Some(Some(w)) = writers.get_mut(ch / 2)
                        && w.write_all(&data[1..]).await.is_err()
                    {
                        writers[ch / 2] = None;
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => break,
                Some(Ok(_)) => {}
            },
            from = to_client.recv() => match from {
                Some((ch, Some(bytes))) => {
                    if sink.send(frame(ch, &bytes)).await.is_err() {
                        break;
                    }
                }
                Some((_, None)) => {
                    open -= 1;
                    if open == 0 {
                        break;
                    }
                }
                None => break,
            },
        }
    }
    for w in writers.iter_mut().flatten() {
        let _ = w.shutdown().await;
    }
    let _ = sink.send(Message::Close(None)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn ports_are_parsed_as_the_kubelet_does() {
        assert_eq!(parse_ports(Some("5678,80")).unwrap(), vec![5678, 80]);
        assert!(
            parse_ports(None)
                .unwrap_err()
                .message
                .contains("at least one port")
        );
        assert!(
            parse_ports(Some("x"))
                .unwrap_err()
                .message
                .contains("unable to parse \"x\"")
        );
        assert!(
            parse_ports(Some("0"))
                .unwrap_err()
                .message
                .contains("must be > 0")
        );
    }

    #[test]
    fn only_a_running_scheduled_pod_is_forwarded() {
        let pod = |node: &str, phase: &str| {
            json!({"metadata": {"name": "p", "namespace": "ns", "uid": "u"},
                   "spec": {"nodeName": node}, "status": {"phase": phase, "podIP": "127.1.2.3"}})
        };
        let e = target(&pod("", "Pending"), vec![1]).unwrap_err();
        assert_eq!(
            (e.code, e.message.as_str()),
            (400, "pod p does not have a host assigned")
        );
        let e = target(&pod("n", "Succeeded"), vec![1]).unwrap_err();
        assert_eq!(e.code, 500);
        assert!(e.message.contains("pod does not exist"));
        let t = target(&pod("n", "Running"), vec![1]).unwrap();
        assert_eq!((t.ip.as_str(), t.pod.as_str()), ("127.1.2.3", "ns/p"));
    }

    #[test]
    fn the_v4_channel_protocol_is_chosen_and_v5_alone_is_refused() {
        let mut h = HeaderMap::new();
        assert_eq!(choose_protocol(&h).unwrap(), "");
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "v5.channel.k8s.io, v4.channel.k8s.io".parse().unwrap(),
        );
        assert_eq!(choose_protocol(&h).unwrap(), V4_CHANNEL);
        h.insert(
            header::SEC_WEBSOCKET_PROTOCOL,
            "v5.channel.k8s.io".parse().unwrap(),
        );
        assert_eq!(choose_protocol(&h).unwrap_err().code, 400);
    }

    #[test]
    fn frames_carry_their_channel_first() {
        assert_eq!(
            frame(3, &5678u16.to_le_bytes()).into_data().as_ref(),
            &[3, 0x2e, 0x16]
        );
    }
}
