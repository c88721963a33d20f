import ArgumentParser
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation

struct Ops: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Long-lived operations: list, show, cancel, resume.",
        discussion: """
            Lists the current user's long-lived operations that are running or completed without \
            a client having received their result (kept 24 h by the server by default). An unknown \
            or expired ID exits 5.
            """,
        subcommands: [List.self, Show.self, Cancel.self, Resume.self]
    )

    static func fetch(_ id: String, container: CKContainer) async throws(CLIError) -> CKOperation {
        try await cli("operation \(id)") { try await container.longLivedOperation(for: id) }
    }

    static func kind(of operation: CKOperation) -> String {
        String(describing: type(of: operation))
    }

    static func describe(_ operation: CKOperation) -> JSONValue {
        var members: [(String, JSONValue)] = [
            ("operationID", .string(operation.operationID)), ("kind", .string(self.kind(of: operation))),
        ]
        if let database = (operation as? CKDatabaseOperation)?.database {
            members.append(("database", .string(database.databaseScope == .public ? "public" : database.databaseScope == .shared ? "shared" : "private")))
        }
        switch operation {
        case let modify as CKModifyRecordsOperation:
            members.append(("recordsToSave", .integer(Int64(modify.recordsToSave?.count ?? 0))))
            members.append(("recordIDsToDelete", .integer(Int64(modify.recordIDsToDelete?.count ?? 0))))
            if let zones = modify.recordsToSave.map({ Set($0.map(\.recordID.zoneID.zoneName)) }), !zones.isEmpty {
                members.append(("zones", .array(zones.sorted().map { .string($0) })))
            }
        case let fetch as CKFetchRecordsOperation:
            members.append(("recordIDs", .integer(Int64(fetch.recordIDs?.count ?? 0))))
        case let query as CKQueryOperation:
            if let query = query.query { members.append(("recordType", .string(query.recordType))) }
        case let changes as CKFetchRecordZoneChangesOperation:
            members.append(("zones", .array((changes.recordZoneIDs ?? []).map { .string($0.zoneName) })))
        default:
            break
        }
        return .object(members)
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print each operation's ID and kind, one a line.")
        @OptionGroup var connection: ConnectionOptions

        func run() async throws {
            let container = try self.connection.makeContainer()
            let ids = try await cli("list operations") { try await container.allLongLivedOperationIDs() }
            for id in ids {
                // One may finish and go between the list and its fetch.
                if let operation = try? await container.longLivedOperation(for: id) {
                    print("\(id)\t\(Ops.kind(of: operation))")
                }
            }
        }
    }

    struct Show: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print one operation's kind and request as JSON.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The operation ID.") var id: String

        func run() async throws {
            let container = try self.connection.makeContainer()
            print(Ops.describe(try await Ops.fetch(self.id, container: container)).jsonText)
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Cancel an operation for good (what it already did stays done).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The operation ID.") var id: String

        func run() async throws {
            let container = try self.connection.makeContainer()
            let operation = try await Ops.fetch(self.id, container: container)
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                operation.completionBlock = { continuation.resume() }
                container.add(operation)
                operation.cancel()
            }
            print("cancelled \(self.id)")
        }
    }

    struct Resume: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Re-attach to an operation and print its callbacks as JSON Lines as they come.",
            discussion: """
                The server replays the callbacks so far, then live ones, then the result (last line, \
                "event": "result"); the operation is not run again. Exit 1 when its result is an error.
                """)
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "The operation ID.") var id: String

        func run() async throws {
            let container = try self.connection.makeContainer()
            let operation = try await Ops.fetch(self.id, container: container)
            let writer = LineWriter(handle: FileHandle.standardOutput)
            let failure = Locked<(any Error)?>(nil)
            func event(_ name: String, _ members: [(String, JSONValue)]) {
                writer.write(JSONValue.object([("event", .string(name))] + members).jsonText)
            }
            func result(_ result: Result<Void, any Error>) {
                switch result {
                case .success: event("result", [("ok", .bool(true))])
                case .failure(let error):
                    failure.withLock { $0 = error }
                    event("result", [("ok", .bool(false)), ("error", .string(CLIError.from(error).message))])
                }
            }
            func item(_ name: String, _ id: CKRecord.ID, _ outcome: Result<Void, any Error>) {
                switch outcome {
                case .success: event(name, [("recordName", .string(id.recordName))])
                case .failure(let error):
                    event(name, [("recordName", .string(id.recordName)), ("error", .string(CLIError.from(error).message))])
                }
            }
            switch operation {
            case let modify as CKModifyRecordsOperation:
                modify.perRecordSaveBlock = { id, outcome in item("saved", id, outcome.map { _ in () }) }
                modify.perRecordDeleteBlock = { id, outcome in item("deleted", id, outcome) }
                modify.modifyRecordsResultBlock = result
            case let fetch as CKFetchRecordsOperation:
                fetch.perRecordResultBlock = { id, outcome in item("fetched", id, outcome.map { _ in () }) }
                fetch.fetchRecordsResultBlock = result
            case let query as CKQueryOperation:
                query.recordMatchedBlock = { id, outcome in item("matched", id, outcome.map { _ in () }) }
                query.queryResultBlock = { outcome in result(outcome.map { _ in () }) }
            case let changes as CKFetchRecordZoneChangesOperation:
                changes.recordWasChangedBlock = { id, outcome in item("changed", id, outcome.map { _ in () }) }
                changes.recordWithIDWasDeletedBlock = { id, _ in item("deleted", id, .success(())) }
                changes.fetchRecordZoneChangesResultBlock = result
            case let zones as CKModifyRecordZonesOperation:
                zones.modifyRecordZonesResultBlock = result
            default:
                break
            }
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                operation.completionBlock = { continuation.resume() }
                container.add(operation)
            }
            writer.flush()
            if let error = failure.withLock({ $0 }) {
                throw ExitCode(CLIError.from(error).exitCode.rawValue)
            }
        }
    }
}
