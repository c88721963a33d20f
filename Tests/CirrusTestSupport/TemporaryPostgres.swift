import COpenSSL
import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// A PostgreSQL server of its own for a test process: a cluster made with `initdb` in a
/// temporary directory, listening on a free loopback port and on a unix socket in that
/// directory, stopped and removed when the process exits.
///
/// PostgreSQL refuses to run as root, so as root (CI) every server command runs as the
/// `postgres` user through `runuser`, and the directory belongs to that user. Each run leaves
/// its process ID in the directory: a later run removes the clusters whose test process is
/// gone (one that crashed or was killed before its `atexit` ran), stopping their servers
/// first.
///
/// The cluster runs with `fsync=off`: what it holds lives only as long as the test process,
/// and the tests measure behaviour, not durability of the disk underneath.
///
/// For example:
/// ```swift
/// let server = try TemporaryPostgres.shared()
/// let url = try server.createDatabase()  // postgres://cirrus:…@127.0.0.1:PORT/t_…
/// ```
public final class TemporaryPostgres: Sendable {
    /// What went wrong starting or using the server, with the command's output.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The role the tests connect as, with a password (the server asks for it on TCP).
    public static let user = "cirrus"
    /// That role's password (a test cluster's, nothing secret).
    public static let password = "cirrus-test-secret"

    /// The cluster's directory (data, socket, log).
    public let directory: String
    /// The loopback TCP port.
    public let port: Int
    /// The binaries' directory (`initdb`, `pg_ctl`, `psql`).
    public let binaries: String

    private let counter = Counter()

    private static let sharedServer = Mutex<TemporaryPostgres?>(nil)
    private static let prefix = "cirrus-pg-"

    /// The server of this test process, started on first use and stopped at exit.
    ///
    /// - throws: ``Failure`` when PostgreSQL is not installed or does not start.
    public static func shared() throws -> TemporaryPostgres {
        try sharedServer.withLock { server in
            if let server { return server }
            let started = try TemporaryPostgres()
            server = started
            // OpenSSL, by default, registers an exit handler at its first use that frees its
            // state while other threads still run (a connection's timer, a late TLS read): a
            // test run crashed so at exit, after every test had passed, once while this
            // cluster stopped and once after. Initialized without it, as every Cirrus entry
            // into OpenSSL does first (`cirrus_openssl_prepare`).
            cirrus_openssl_prepare()
            atexit { TemporaryPostgres.stopShared() }
            return started
        }
    }

    private static func stopShared() {
        sharedServer.withLock { server in
            server?.stop()
            server = nil
        }
    }

    /// Starts a new cluster (prefer ``shared()``: one cluster a process, a database a test).
    /// A test that stops or restarts its server (``stopServer()``, ``restartServer()``)
    /// starts one of its own this way, and ``stop()``s it at its end.
    ///
    /// - throws: ``Failure``.
    public init() throws {
        binaries = try Self.findBinaries()
        Self.removeStaleClusters(binaries: binaries)
        var lastFailure: Failure?
        // A free port can be taken between probing it and the server binding it: try again.
        for _ in 0..<3 {
            let directory = NSTemporaryDirectory() + Self.prefix + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
            let port = try Self.freePort()
            do {
                try Self.create(directory: directory, port: port, binaries: binaries)
                self.directory = directory
                self.port = port
                return
            } catch let failure as Failure {
                lastFailure = failure
                Self.destroy(directory: directory, binaries: binaries)
            }
        }
        throw lastFailure ?? Failure(description: "PostgreSQL did not start")
    }

    /// A `postgres://` URL of the cluster's server for `database`, over TCP with the password.
    public func url(database: String) -> String {
        "postgres://\(Self.user):\(Self.password)@127.0.0.1:\(port)/\(database)"
    }

    /// Creates an empty database with a fresh name and returns its URL.
    ///
    /// - throws: ``Failure`` when `CREATE DATABASE` fails.
    public func createDatabase() throws -> String {
        let name = "t_\(getpid())_\(counter.next())"
        try psql("CREATE DATABASE \(name) OWNER \(Self.user)")
        return url(database: name)
    }

    /// Runs `sql` as the superuser in database `postgres` and returns what `psql` printed
    /// (unaligned, tuples only).
    ///
    /// - throws: ``Failure`` when `psql` fails.
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try Self.run(
            binaries + "/psql",
            [
                "-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", "\(port)", "-U", "postgres",
                "-d", database, "-c", sql,
            ],
            asPostgres: false)
    }

    /// Stops the server and removes its directory.
    public func stop() {
        Self.destroy(directory: directory, binaries: binaries)
    }

    /// Stops the server the way an administrator does (`pg_ctl stop -m fast`: sessions are
    /// ended with `admin_shutdown`, the data is kept); ``startServer()`` starts it again.
    /// Only on a cluster of the test's own, never on ``shared()``.
    ///
    /// - throws: ``Failure`` when `pg_ctl` fails.
    public func stopServer() throws {
        try Self.run(
            binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "fast", "-w", "-t", "120", "stop"], asPostgres: true)
    }

    /// Starts the server ``stopServer()`` stopped, on the same port, and returns once it
    /// accepts sessions.
    ///
    /// - throws: ``Failure`` when `pg_ctl` fails.
    public func startServer() throws {
        try Self.run(
            binaries + "/pg_ctl",
            [
                "-D", directory + "/data", "-l", directory + "/server.log", "-o",
                Self.serverOptions(directory: directory, port: port), "-w", "-t", "120", "start",
            ],
            asPostgres: true)
    }

    /// Restarts the server (`pg_ctl restart -m fast`) and returns once it accepts sessions
    /// again. Only on a cluster of the test's own, never on ``shared()``.
    ///
    /// - throws: ``Failure`` when `pg_ctl` fails.
    public func restartServer() throws {
        try Self.run(
            binaries + "/pg_ctl",
            [
                "-D", directory + "/data", "-l", directory + "/server.log", "-o",
                Self.serverOptions(directory: directory, port: port), "-m", "fast", "-w", "-t", "120", "restart",
            ],
            asPostgres: true)
    }

    // MARK: - Cluster life

    /// Room for the storages the tests of a process open at once on the shared cluster: each
    /// holds up to its pool's connections, a listener's and, while it opens, a migration's
    /// (about 6), and the conformance suite runs its tests in parallel.
    private static func serverOptions(directory: String, port: Int) -> String {
        [
            "-p \(port)", "-k \(directory)", "-c listen_addresses=127.0.0.1", "-c fsync=off",
            "-c max_connections=400", "-c shared_buffers=32MB",
        ].joined(separator: " ")
    }

    private static func create(directory: String, port: Int, binaries: String) throws {
        guard mkdir(directory, 0o755) == 0 else {
            throw Failure(description: "mkdir \(directory): \(String(cString: strerror(errno)))")
        }
        try "\(getpid())\n".write(toFile: directory + "/owner.pid", atomically: true, encoding: .utf8)
        try "\(password)\n".write(toFile: directory + "/password", atomically: true, encoding: .utf8)
        try giveToPostgres(directory)
        try run(
            binaries + "/initdb",
            [
                "-D", directory + "/data", "-U", "postgres", "--auth-local=trust", "--auth-host=scram-sha-256",
                "--pwfile=" + directory + "/password", "-E", "UTF8", "--no-locale", "--no-sync",
            ],
            asPostgres: true)
        let options = serverOptions(directory: directory, port: port)
        try run(
            binaries + "/pg_ctl",
            ["-D", directory + "/data", "-l", directory + "/server.log", "-o", options, "-w", "-t", "120", "start"],
            asPostgres: true)
        let create = "CREATE ROLE \(user) LOGIN CREATEDB PASSWORD '\(password)'"
        _ = try run(
            binaries + "/psql",
            [
                "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", directory, "-p", "\(port)", "-U", "postgres", "-d", "postgres",
                "-c", create,
            ],
            asPostgres: false)
    }

    private static func destroy(directory: String, binaries: String) {
        if FileManager.default.fileExists(atPath: directory + "/data/postmaster.pid") {
            _ = try? run(
                binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "-t", "60", "stop"],
                asPostgres: true)
        }
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Removes the clusters of test processes that are gone.
    private static func removeStaleClusters(binaries: String) {
        let temporary = NSTemporaryDirectory()
        guard let entries = try? FileManager.default.contentsOfDirectory(atPath: temporary) else { return }
        for entry in entries where entry.hasPrefix(prefix) {
            let directory = temporary + entry
            let owner = (try? String(contentsOfFile: directory + "/owner.pid", encoding: .utf8))
                .flatMap { pid_t($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
            if let owner, owner == getpid() || kill(owner, 0) == 0 || errno == EPERM { continue }
            // One of this process's that another thread is creating (no owner file yet).
            if owner == nil && entry.hasPrefix(prefix + "\(getpid())-") { continue }
            destroy(directory: directory, binaries: binaries)
        }
    }

    // MARK: - Helpers

    private static func findBinaries() throws -> String {
        if let configured = ProcessInfo.processInfo.environment["CIRRUS_PG_BIN"] { return configured }
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? [])
            .compactMap(Int.init).sorted()
        guard let newest = versions.last else {
            throw Failure(description: "PostgreSQL is not installed (no \(root)/*/bin; apt-get install postgresql)")
        }
        return "\(root)/\(newest)/bin"
    }

    private static var isRoot: Bool { geteuid() == 0 }

    /// Runs a PostgreSQL binary (as the `postgres` user when this process is root and
    /// `asPostgres`); returns its output.
    @discardableResult
    private static func run(_ executable: String, _ arguments: [String], asPostgres: Bool) throws -> String {
        let process = ChildProcess()
        if asPostgres && isRoot {
            process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            process.arguments = ["-u", "postgres", "--", executable] + arguments
        } else {
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
        }
        process.currentDirectoryURL = URL(fileURLWithPath: "/")
        let (status, output) = try process.runCapturingOutput()
        guard status == 0 else {
            let name = (executable as NSString).lastPathComponent
            throw Failure(description: "\(name) exited with \(status): \(output)")
        }
        return output
    }

    /// As root: makes the `postgres` user own `path` (initdb runs as that user).
    private static func giveToPostgres(_ path: String) throws {
        guard isRoot else { return }
        guard let entry = getpwnam("postgres") else {
            throw Failure(description: "no postgres user (apt-get install postgresql creates it)")
        }
        for file in [path, path + "/owner.pid", path + "/password"] {
            guard chown(file, entry.pointee.pw_uid, entry.pointee.pw_gid) == 0 else {
                throw Failure(description: "chown \(file): \(String(cString: strerror(errno)))")
            }
        }
    }

    /// A loopback TCP port nothing listens on right now.
    private static func freePort() throws -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard descriptor >= 0 else { throw Failure(description: "socket: \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { socketAddress in
                bind(descriptor, socketAddress, length) == 0 && getsockname(descriptor, socketAddress, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "bind: \(String(cString: strerror(errno)))") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}

/// Numbers the databases of one cluster.
private final class Counter: Sendable {
    private let value = Mutex(0)

    func next() -> Int {
        value.withLock { value in
            value += 1
            return value
        }
    }
}
