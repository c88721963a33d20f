import Foundation
import PostgresNIO

/// Where a PostgreSQL server is and how to sign in, from a `postgres://` URL:
/// `postgres://USER:PASSWORD@HOST:PORT/DATABASE?sslmode=MODE` (`postgresql://` too).
///
/// The port defaults to 5432, the user to `postgres`, the database to the user's name;
/// `sslmode` is `disable`, `prefer` (the default, as libpq's) or `require`. A host starting
/// with `/` (percent-encoded in the URL, or given as `?host=/run/postgresql`) is a directory
/// holding the server's unix socket.
///
/// The password never appears in ``description`` (or in any log line that prints this
/// value): it reads `***` there.
///
/// For example:
/// ```swift
/// let url = try PostgresURL("postgres://cirrus:s3cret@db.internal:5432/cirrus")
/// print(url)  // postgres://cirrus:***@db.internal:5432/cirrus
/// ```
public struct PostgresURL: Sendable, Hashable, CustomStringConvertible {
    /// What an unusable URL got wrong (never quoting the password).
    public struct Invalid: Error, Hashable, CustomStringConvertible {
        public var description: String
    }

    /// How the connection is encrypted.
    public enum TLSMode: String, Sendable, Hashable {
        case disable, prefer, require
    }

    public var host: String
    public var port: Int
    public var user: String
    public var password: String?
    public var database: String
    public var tlsMode: TLSMode

    /// Parses `string`.
    ///
    /// - throws: ``Invalid`` naming what is wrong.
    public init(_ string: String) throws(Invalid) {
        guard let components = URLComponents(string: string) else {
            throw Invalid(description: "not a URL (expected postgres://USER:PASSWORD@HOST:PORT/DATABASE)")
        }
        guard let scheme = components.scheme?.lowercased(), scheme == "postgres" || scheme == "postgresql" else {
            throw Invalid(description: "the URL's scheme must be postgres:// or postgresql://")
        }
        let query = components.queryItems ?? []
        func parameter(_ name: String) -> String? { query.last { $0.name == name }?.value }
        for item in query where !["sslmode", "host"].contains(item.name) {
            throw Invalid(description: "unknown URL parameter \"\(item.name)\" (known: sslmode, host)")
        }
        let host = parameter("host") ?? components.host ?? ""
        guard !host.isEmpty else { throw Invalid(description: "the URL names no host") }
        let port = components.port ?? 5432
        guard (1...65535).contains(port) else { throw Invalid(description: "port \(port) is out of range") }
        let user = components.user ?? "postgres"
        guard !user.isEmpty else { throw Invalid(description: "the URL's user name is empty") }
        var path = components.path
        if path.hasPrefix("/") { path.removeFirst() }
        guard !path.contains("/") else { throw Invalid(description: "the database name \"\(path)\" contains '/'") }
        let modeName = parameter("sslmode") ?? TLSMode.prefer.rawValue
        guard let tlsMode = TLSMode(rawValue: modeName) else {
            throw Invalid(description: "sslmode \"\(modeName)\" is not one of disable, prefer, require")
        }
        self.host = host
        self.port = port
        self.user = user
        self.password = components.password
        self.database = path.isEmpty ? user : path
        self.tlsMode = tlsMode
    }

    /// The URL with the password masked.
    public var description: String {
        var components = URLComponents()
        components.scheme = "postgres"
        components.user = user
        components.password = password == nil ? nil : "***"
        if host.hasPrefix("/") {
            components.host = "localhost"
            components.queryItems = [URLQueryItem(name: "host", value: host)]
        } else {
            components.host = host
        }
        components.port = port
        components.path = "/" + database
        if tlsMode != .prefer {
            components.queryItems = (components.queryItems ?? []) + [URLQueryItem(name: "sslmode", value: tlsMode.rawValue)]
        }
        return components.string ?? "postgres://\(user)@\(host):\(port)/\(database)"
    }

    /// The configuration of one connection to this server (a connection of its own, outside
    /// the pool).
    func connectionConfiguration() throws -> PostgresConnection.Configuration {
        var configuration: PostgresConnection.Configuration
        if host.hasPrefix("/") {
            let socket = host + "/.s.PGSQL.\(port)"
            configuration = .init(unixSocketPath: socket, username: user, password: password, database: database)
        } else {
            let tls: PostgresConnection.Configuration.TLS
            switch tlsMode {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(try NIOSSLContext(configuration: .makeClientConfiguration()))
            case .require: tls = .require(try NIOSSLContext(configuration: .makeClientConfiguration()))
            }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        return configuration
    }

    /// The client configuration for this server.
    var clientConfiguration: PostgresClient.Configuration {
        var configuration: PostgresClient.Configuration
        if host.hasPrefix("/") {
            let socket = host + "/.s.PGSQL.\(port)"
            configuration = .init(unixSocketPath: socket, username: user, password: password, database: database)
        } else {
            let tls: PostgresClient.Configuration.TLS
            switch tlsMode {
            case .disable: tls = .disable
            case .prefer: tls = .prefer(.makeClientConfiguration())
            case .require: tls = .require(.makeClientConfiguration())
            }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: tls)
        }
        return configuration
    }
}
