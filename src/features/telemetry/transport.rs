//! The HTTP client the OTLP exporter sends batches with: hyper + rustls (the platform's root
//! certificates), the same stack the proxy reaches gateways with, so tracing adds neither
//! reqwest nor OpenSSL. Each send has a time limit that covers the answer's body, and the body
//! is read only up to [`MAX_RESPONSE_BYTES`] (a collector answers with a few bytes).

use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper_rustls::{HttpsConnector, HttpsConnectorBuilder};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use opentelemetry_http::{HttpClient, HttpError, Request, Response};

/// A collector's answer is a small protobuf (partial success) or an error text; more is not
/// read.
const MAX_RESPONSE_BYTES: usize = 64 * 1024;
/// Batches go one at a time, so one kept-alive connection is all there is to pool.
const POOL_MAX_IDLE: usize = 2;
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, Clone)]
pub struct Transport {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    /// The whole request, answer body included.
    timeout: Duration,
}

impl Transport {
    pub fn new(timeout: Duration) -> anyhow::Result<Self> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(CONNECT_TIMEOUT));
        let tls = crate::net::tls::client_config(None)?;
        let https = HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_max_idle_per_host(POOL_MAX_IDLE)
            .build(https);
        Ok(Transport { client, timeout })
    }
}

#[async_trait::async_trait]
impl HttpClient for Transport {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let request = request.map(Full::new);
        let exchange = async {
            let response = self.client.request(request).await?;
            let (head, body) = response.into_parts();
            let body = Limited::new(body, MAX_RESPONSE_BYTES).collect().await?;
            Ok::<_, HttpError>(Response::from_parts(head, body.to_bytes()))
        };
        match tokio::time::timeout(self.timeout, exchange).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {} ms", self.timeout.as_millis()).into()),
        }
    }
}
