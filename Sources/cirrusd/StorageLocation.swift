import ArgumentParser
import CirrusStore
import Foundation

/// `--data-dir`: where the embedded SQLite storage keeps its data. One type for `cirrusd` and
/// its subcommands, so `cirrusd users list --data-dir DIR` reaches the subcommand (a second
/// option of the same name would be taken by `cirrusd` itself).
struct StorageLocation: ParsableArguments {
    @Option(help: "Where the embedded SQLite storage keeps its data.")
    var dataDir = "./cirrus-data"

    /// The storage of the data directory, for an administration command; refuses a directory
    /// that holds none instead of creating one.
    func openExisting() throws -> SQLiteStorage {
        let path = (dataDir as NSString).appendingPathComponent(SQLiteStorage.fileName)
        guard FileManager.default.fileExists(atPath: path) else {
            throw ValidationError("no Cirrus data in \(dataDir) (no \(SQLiteStorage.fileName)); pass --data-dir")
        }
        return try SQLiteStorage(directory: dataDir)
    }
}
