import ArgumentParser
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation

struct Records: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Fetch, query and delete records.",
        subcommands: [Get.self, Query.self, Delete.self]
    )

    /// Prints records as JSON Lines on stdout.
    static func printRecords(_ records: [CKRecord], zoneID: CKRecordZone.ID) {
        let converter = FieldConverter(zoneID: zoneID)
        for record in records {
            print(RecordJSON.object(record, converter: converter, system: true).jsonText)
        }
    }

    struct Get: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Fetch records by name and print them as JSON Lines.",
            discussion: "Exit 5 when any of them does not exist (the others are still printed).")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var location: LocationOptions
        @Argument(help: "Record names.") var names: [String]

        func validate() throws {
            guard !self.names.isEmpty else { throw ValidationError("give at least one record name") }
        }

        func run() async throws {
            let container = try self.connection.makeContainer()
            let zoneID = self.location.zoneID
            let ids = self.names.map { CKRecord.ID(recordName: $0, zoneID: zoneID) }
            let results = try await cli("fetch") { try await self.location.database(of: container).records(for: ids) }
            var worst: CLIError?
            for id in ids {
                switch results[id] {
                case .success(let record)?:
                    Records.printRecords([record], zoneID: zoneID)
                case .failure(let error)?:
                    let failure = CLIError.from(error, context: "record \(id.recordName)")
                    Terminal.error(failure.message)
                    worst = worst ?? failure
                case nil:
                    worst = worst ?? CLIError(.failure, "record \(id.recordName): no result")
                }
            }
            if let worst { throw ExitCode(worst.exitCode.rawValue) }
        }
    }

    struct Query: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Run a query and print the matching records as JSON Lines.",
            discussion: """
                The predicate takes CloudKit's format (==, !=, <, <=, >, >=, BEGINSWITH, IN, \
                CONTAINS, BETWEEN, AND, NOT, self CONTAINS 'words', TRUEPREDICATE), e.g. \
                --predicate "age >= 18 AND name BEGINSWITH 'A'". Follows cursors until --limit.
                """)

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var location: LocationOptions
        @Option(name: .customLong("record-type"), help: "The record type.") var recordType: String
        @Option(help: "The predicate (default TRUEPREDICATE).") var predicate = "TRUEPREDICATE"
        @Option(help: "Sort by key; key:desc for descending (repeatable).") var sort: [String] = []
        @Option(help: "At most this many records (default: all).") var limit: Int?
        @Option(name: .customLong("desired-key"), help: "Only these fields (repeatable).") var desiredKeys: [String] = []

        func run() async throws {
            let parsed: CKPredicate
            do {
                parsed = try CKPredicate(parsing: self.predicate)
            } catch {
                throw CLIError.usage("--predicate: \(error)")
            }
            if let limit = self.limit, limit < 1 { throw CLIError.usage("--limit must be at least 1") }
            let query = CKQuery(recordType: self.recordType, predicate: parsed)
            query.sortDescriptors = self.sort.map { item in
                let parts = item.split(separator: ":")
                return CKSortDescriptor(key: String(parts[0]), ascending: !(parts.count > 1 && parts[1].lowercased().hasPrefix("desc")))
            }
            let container = try self.connection.makeContainer()
            let database = self.location.database(of: container)
            let zoneID = self.location.zoneID
            let desired = self.desiredKeys.isEmpty ? nil : self.desiredKeys
            var remaining = self.limit ?? Int.max
            var page = try await cli("query") {
                try await database.records(
                    matching: query, inZoneWith: zoneID, desiredKeys: desired, resultsLimit: min(remaining, CKQueryOperation.maximumResults))
            }
            while true {
                for (_, result) in page.matchResults.prefix(remaining) {
                    switch result {
                    case .success(let record): Records.printRecords([record], zoneID: zoneID)
                    case .failure(let error): throw CLIError.from(error, context: "query")
                    }
                }
                remaining -= min(remaining, page.matchResults.count)
                guard remaining > 0, let cursor = page.queryCursor else { break }
                page = try await cli("query") {
                    try await database.records(
                        continuingMatchFrom: cursor, desiredKeys: desired, resultsLimit: min(remaining, CKQueryOperation.maximumResults))
                }
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Delete records by name (at most 400 per call).",
            discussion: "Prints each deleted name. Exit 1 when any delete failed.")

        @OptionGroup var connection: ConnectionOptions
        @OptionGroup var location: LocationOptions
        @Argument(help: "Record names.") var names: [String]

        func validate() throws {
            guard !self.names.isEmpty else { throw ValidationError("give at least one record name") }
            guard self.names.count <= 400 else { throw ValidationError("at most 400 records per call") }
        }

        func run() async throws {
            let container = try self.connection.makeContainer()
            let ids = self.names.map { CKRecord.ID(recordName: $0, zoneID: self.location.zoneID) }
            let results = try await cli("delete") {
                try await self.location.database(of: container).modifyRecords(saving: [], deleting: ids, atomically: false)
            }
            var worst: CLIError?
            for id in ids {
                switch results.deleteResults[id] {
                case .success?: print(id.recordName)
                case .failure(let error)?:
                    let failure = CLIError.from(error, context: "record \(id.recordName)")
                    Terminal.error(failure.message)
                    worst = worst ?? failure
                case nil: worst = worst ?? CLIError(.failure, "record \(id.recordName): no result")
                }
            }
            if let worst { throw ExitCode(worst.exitCode.rawValue) }
        }
    }
}

struct Zones: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "List, create and delete zones.",
        subcommands: [List.self, Create.self, Delete.self]
    )

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Print the database's zone names, one a line.")
        @OptionGroup var connection: ConnectionOptions
        @Option(help: "private or public.") var database: DatabaseChoice = .private

        func run() async throws {
            let container = try self.connection.makeContainer()
            let zones = try await cli("list zones") {
                try await container.database(with: self.database == .public ? .public : .private).allRecordZones()
            }
            for zone in zones { print(zone.zoneID.zoneName) }
        }
    }

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Create zones (existing ones are left as they are).")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Zone names.") var names: [String]

        func validate() throws {
            guard !self.names.isEmpty else { throw ValidationError("give at least one zone name") }
        }

        func run() async throws {
            let container = try self.connection.makeContainer()
            let results = try await cli("create zones") {
                try await container.privateCloudDatabase.modifyRecordZones(
                    saving: self.names.map { CKRecordZone(zoneName: $0) }, deleting: [])
            }
            try Zones.report(results.saveResults.map { ($0.key, $0.value.map { _ in () }) }, order: self.names)
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete zones and every record in them.")
        @OptionGroup var connection: ConnectionOptions
        @Argument(help: "Zone names.") var names: [String]

        func validate() throws {
            guard !self.names.isEmpty else { throw ValidationError("give at least one zone name") }
        }

        func run() async throws {
            let container = try self.connection.makeContainer()
            let results = try await cli("delete zones") {
                try await container.privateCloudDatabase.modifyRecordZones(
                    saving: [], deleting: self.names.map { CKRecordZone.ID(zoneName: $0) })
            }
            try Zones.report(results.deleteResults.map { ($0.key, $0.value) }, order: self.names)
        }
    }

    /// Prints each zone that succeeded; the first failure decides the exit code.
    static func report(_ results: [(CKRecordZone.ID, Result<Void, any Error>)], order: [String]) throws {
        let byName = Dictionary(results.map { ($0.0.zoneName, $0.1) }, uniquingKeysWith: { first, _ in first })
        var worst: CLIError?
        for name in order {
            switch byName[name] {
            case .success?: print(name)
            case .failure(let error)?:
                let failure = CLIError.from(error, context: "zone \(name)")
                Terminal.error(failure.message)
                worst = worst ?? failure
            case nil: worst = worst ?? CLIError(.failure, "zone \(name): no result")
            }
        }
        if let worst { throw ExitCode(worst.exitCode.rawValue) }
    }
}
