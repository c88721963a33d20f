import COpenSSL
import Foundation

#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// `URLSession.shared` for the tests' plain HTTP requests to loopback (metrics, health, the
/// operations endpoint), with OpenSSL set up first as Cirrus sets it up: FoundationNetworking's
/// libcurl initializes OpenSSL when it starts, and had it done so first, with OpenSSL's exit
/// handler, that handler would free OpenSSL's state at exit under the test process's other
/// threads (see `cirrus_openssl_prepare`).
public var loopbackURLSession: URLSession {
    cirrus_openssl_prepare()
    return URLSession.shared
}
