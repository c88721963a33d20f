import ArgumentParser
import CirrusOperations
import Foundation

/// `cirrusd backup`: a consistent copy of a data directory, taken while the server runs.
struct Backup: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Copy a data directory's storage and server secret into one backup file.",
        usage: "cirrusd backup [--data-dir <data-dir>] --to <file>",
        discussion: """
            Safe while cirrusd serves the directory: the copy holds every write acknowledged \
            before the backup began. Restore it with 'cirrusd restore'.
            """
    )

    @Option(help: "The data directory to back up.")
    var dataDir = "./cirrus-data"

    @Option(help: "The backup file to write; it must not exist yet.")
    var to: String

    func run() throws {
        do {
            let summary = try DataDirectoryBackup.backup(dataDirectory: self.dataDir, to: self.to)
            print("backed up \(self.dataDir) to \(self.to) (\(summary.bytes) bytes\(summary.includesServerSecret ? ", with the server secret" : ""))")
        } catch {
            throw ValidationFailure(message: error.description)
        }
    }
}

/// `cirrusd restore`: a data directory made from a backup file.
struct Restore: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Make a new data directory from a file written by 'cirrusd backup'.",
        usage: "cirrusd restore --from <file> --data-dir <data-dir>",
        discussion: """
            The directory must be new or hold no storage yet. Then start cirrusd with \
            --data-dir pointing at it.
            """
    )

    @Option(help: "The backup file.")
    var from: String

    @Option(help: "The data directory to create.")
    var dataDir: String

    func run() throws {
        do {
            let summary = try DataDirectoryBackup.restore(from: self.from, into: self.dataDir)
            print("restored \(self.from) into \(self.dataDir) (\(summary.bytes) bytes\(summary.includesServerSecret ? ", with the server secret" : ""))")
        } catch {
            throw ValidationFailure(message: error.description)
        }
    }
}

/// A failure reported as `Error: MESSAGE` with exit status 1, without the usage text.
struct ValidationFailure: Error, CustomStringConvertible {
    var message: String
    var description: String { self.message }
}
