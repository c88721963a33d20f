import CirrusKit
import CirrusModel
import CirrusServer
import CirrusStore
import Foundation
import Testing

/// A real server with the SQLite storage in a temporary directory; `body` gets a factory of
/// containers (one per user) talking to it over TLS: CloudKit code against the whole stack.
func withStack(
    _ body: (_ container: @escaping @Sendable (String) -> CKContainer) async throws -> Void
) async throws {
    let directory = FileManager.default.temporaryDirectory.appendingPathComponent("cirrus-e2e-\(UUID().uuidString)").path
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let storage = try SQLiteStorage(directory: directory)
    defer { try? storage.close() }
    try await withServer(configure: { $0.executor = StorageExecutor(storage: storage) }) { _, port in
        try await body { user in
            CKContainer(identifier: "iCloud.com.example.notes", configuration: TestCertificates.client(port: port, user: user))
        }
    }
}

/// Waits until `operation` finished (after the code under test added it itself).
func finished(_ operation: Operation) async {
    await waitUntilFinished(operation)
}
