import ArgumentParser
import CirrusCLI
import Foundation

/// `cirrus`: load testing, data import and export, and operations tools for a Cirrus server.
struct Cirrus: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cirrus",
        abstract: "Load testing, data import and export, and inspection of a Cirrus server over TLS.",
        discussion: """
            Connection settings come from the flags, else the environment (CIRRUS_SERVER=host:port, \
            CIRRUS_CA, CIRRUS_CERT, CIRRUS_KEY, CIRRUS_TOKEN, CIRRUS_CONTAINER), else the development \
            files in ./Certs (ca.pem, alice.pem, alice-key.pem) when they exist.

            Exit codes: 0 success; 1 the command ran but something failed (an operation or some of \
            its records, skipped rows, benchmark errors); 2 usage (bad flags, unreadable files); \
            3 the server could not be reached or refused us (connection, TLS, authentication); \
            4 malformed input data; 5 not found (record, zone, operation, import state); \
            130 interrupted. Errors are one line on stderr.
            """,
        version: "0.1.0",
        subcommands: [
            Bench.self, Import.self, Export.self, Records.self, Zones.self, Changes.self, Ops.self, Watch.self,
        ]
    )
}

@main
enum CirrusMain {
    static func main() async {
        let status = await self.run(Array(CommandLine.arguments.dropFirst()))
        fflush(nil)
        exit(status)
    }

    static func run(_ arguments: [String]) async -> Int32 {
        do {
            var command = try Cirrus.parseAsRoot(arguments)
            if var command = command as? any AsyncParsableCommand {
                try await command.run()
            } else {
                try command.run()
            }
            return CLIExitCode.success.rawValue
        } catch let error as CLIError {
            Terminal.error(error.message)
            return error.exitCode.rawValue
        } catch let code as ExitCode {
            return code.rawValue
        } catch {
            let code = Cirrus.exitCode(for: error)
            if code == .success {
                print(Cirrus.fullMessage(for: error))
                return 0
            }
            let message = Cirrus.message(for: error).split(whereSeparator: \.isNewline).first.map(String.init) ?? "\(error)"
            Terminal.error("\(message) (see 'cirrus --help')")
            return CLIExitCode.usage.rawValue
        }
    }
}

/// Output to the terminal: errors and progress on stderr, results on stdout.
enum Terminal {
    static let isInteractive = isatty(STDERR_FILENO) == 1

    static func error(_ message: String) {
        FileHandle.standardError.write(Data("cirrus: error: \(message)\n".utf8))
    }

    static func note(_ message: String) {
        FileHandle.standardError.write(Data("\(message)\n".utf8))
    }

    /// Rewrites the progress line (terminals only).
    static func progress(_ line: String) {
        guard self.isInteractive else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(line)".utf8))
    }

    static func endProgress() {
        guard self.isInteractive else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }
}
