import ArgumentParser
import CirrusPostgres
import CirrusStore
import Foundation

/// Where the data is: `--data-dir` (the embedded SQLite storage, and the asset files) and
/// `--database` (a PostgreSQL server instead of SQLite). One type for `cirrusd` and its
/// subcommands, so `cirrusd users list --data-dir DIR` reaches the subcommand (a second option
/// of the same name would be taken by `cirrusd` itself).
struct StorageLocation: ParsableArguments {
    /// The variable a subcommand reads `--database` from (the server reads every `CIRRUSD_*`
    /// variable through its layered configuration).
    static let databaseEnvironmentName = "CIRRUSD_DATABASE"

    @Option(help: "Where the embedded SQLite storage keeps its data; with --database, where the asset files are.")
    var dataDir = "./cirrus-data"

    @Option(
        help: ArgumentHelp(
            "Keep the data in this PostgreSQL server instead of SQLite: postgres://USER@HOST:PORT/DATABASE[?sslmode=require].",
            discussion: """
                Also CIRRUSD_DATABASE. The password is never taken from the command line, where every user of \
                the machine can read it: give it in the URL in CIRRUSD_DATABASE or the configuration file, in \
                PGPASSWORD, or in --database-password-file. Nodes sharing one database share --data-dir's assets \
                directory too.
                """,
            valueName: "url"))
    var database: String?

    @Option(help: ArgumentHelp("A file whose first line is the PostgreSQL password.", valueName: "file"))
    var databasePasswordFile: String?

    /// The PostgreSQL server to use, or nil for the embedded SQLite storage.
    ///
    /// - parameter commandLine: the arguments as typed (a password there is refused).
    /// - throws: `ValidationError` for a malformed URL, a password on the command line or an
    ///   unreadable password file.
    func postgresURL(commandLine: [String], environment: [String: String]) throws -> PostgresURL? {
        guard let text = self.database ?? environment[Self.databaseEnvironmentName], !text.isEmpty else {
            if self.databasePasswordFile != nil {
                throw ValidationError("--database-password-file needs --database (or CIRRUSD_DATABASE)")
            }
            return nil
        }
        var url: PostgresURL
        do {
            url = try PostgresURL(text)
        } catch {
            throw ValidationError("--database: \(error.description)")
        }
        if Self.typedValues(of: "--database", in: commandLine).contains(where: { (try? PostgresURL($0))?.password != nil }) {
            throw ValidationError(
                "--database: the URL holds a password, which every user of this machine can read on the command line; "
                    + "give it in CIRRUSD_DATABASE, PGPASSWORD or --database-password-file instead")
        }
        if url.password == nil {
            if let path = self.databasePasswordFile {
                guard let data = FileManager.default.contents(atPath: path) else {
                    throw ValidationError("--database-password-file: cannot read \(path)")
                }
                let firstLine = String(decoding: data, as: UTF8.self).split(whereSeparator: \.isNewline).first
                guard let password = firstLine.map(String.init), !password.isEmpty else {
                    throw ValidationError("--database-password-file: \(path) holds no password on its first line")
                }
                url.password = password
            } else if let password = environment["PGPASSWORD"], !password.isEmpty {
                url.password = password
            }
        }
        return url
    }

    /// The values given to `flag` in `arguments` (`--flag VALUE` and `--flag=VALUE`).
    static func typedValues(of flag: String, in arguments: [String]) -> [String] {
        var values: [String] = []
        for (index, argument) in arguments.enumerated() {
            if argument == flag, index + 1 < arguments.count {
                values.append(arguments[index + 1])
            } else if argument.hasPrefix(flag + "=") {
                values.append(String(argument.dropFirst(flag.count + 1)))
            }
        }
        return values
    }

    /// The user directory and tokens of this location, for an administration command: the
    /// PostgreSQL server's, or the data directory's (refusing a directory that holds no storage
    /// instead of creating one).
    func openDirectory() async throws -> ServedStorage {
        let environment = ProcessInfo.processInfo.environment
        if let url = try self.postgresURL(commandLine: CommandLine.arguments, environment: environment) {
            return try await ServedStorage.openPostgres(url: url, logLevel: .warning)
        }
        let path = (dataDir as NSString).appendingPathComponent(SQLiteStorage.fileName)
        guard FileManager.default.fileExists(atPath: path) else {
            throw ValidationError("no Cirrus data in \(dataDir) (no \(SQLiteStorage.fileName)); pass --data-dir or --database")
        }
        return .sqlite(try SQLiteStorage(directory: dataDir))
    }
}
