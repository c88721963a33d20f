/// The development certificates in `Certs/` (a CA, a server certificate for localhost, the
/// clients alice, bob, carol …), found from this file's path, for every test target.
///
/// For example:
/// ```swift
/// let key = TestCertificates.path("alice-key.pem")
/// ```
public enum TestCertificates {
    /// The repository's root directory.
    public static let repositoryRoot: String = {
        var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)  // TestCertificates.swift, CirrusTestSupport, Tests
        return parts.joined(separator: "/")
    }()

    /// `Certs/` of the repository.
    public static let directory: String = repositoryRoot + "/Certs"

    /// The file `name` in `Certs/`, e.g. `path("ca.pem")`.
    public static func path(_ name: String) -> String { directory + "/" + name }

    /// The certificate (PEM) of the client `user` (`alice` …).
    public static func certificate(of user: String) -> String { path("\(user).pem") }

    /// The private key (PEM) of the client `user`.
    public static func key(of user: String) -> String { path("\(user)-key.pem") }
}
