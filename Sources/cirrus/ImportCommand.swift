import ArgumentParser
import CirrusBench
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation

struct Import: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Import a JSON Lines or CSV file as records.",
        discussion: """
            JSON Lines: one object per line; keys are field names; integers become int, other \
            numbers double, booleans bool (stored as 1/0), strings string, arrays lists; tagged \
            values {"$date": "…"}, {"$bytes": "base64"}, {"$location": {"latitude": …, "longitude": …}}, \
            {"$reference": "name"}, {"$asset": "path"} as `cirrus export` writes them; "$recordName" \
            and "$recordType" name the record and its type. CSV: a header row of field names; each \
            column's type is inferred from all its cells (int, double, bool, date (ISO 8601), else \
            string); empty cells leave the field unset. --field name:type overrides (string, int, \
            double, bool, date, bytes, location, reference, asset, [type] for lists; in CSV a list is \
            ;-separated).

            Records are saved in batches of --batch-size (at most 400) per long-lived \
            CKModifyRecordsOperation, --parallel batches in flight, with save policy allKeys. Each \
            record's name is the --id-field value, else $recordName, else <importID>-<line>.

            Resume: the import keeps its state in FILE.cirrus-import (or --state) — its ID and, per \
            batch, each operation ID (written before the operation is sent) and whether its result \
            arrived. If the client dies, `cirrus import FILE --resume` skips finished batches, \
            re-attaches to the server's long-lived operations of the others (they kept running; \
            their results are replayed, nothing runs twice), and sends again only batches whose \
            operation the server does not know. Sending a batch again rewrites the same records \
            with the same names and values, so every row is stored exactly once. The state file is \
            removed when the import finishes. The file must not change in between.

            Bad rows (malformed JSON or CSV, a value that is not its type) are reported with their \
            line: --on-error fail (default) stops before anything is sent, exit 4; --on-error skip \
            imports the rest and exits 1.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var location: LocationOptions

    @Argument(help: "The JSON Lines (.jsonl, .ndjson, .json) or CSV (.csv) file.") var file: String
    @Option(name: .customLong("record-type"), help: "Record type of rows without $recordType.") var recordType: String?
    @Option(help: "jsonl or csv (default: from the file name).") var format: String?
    @Option(name: .customLong("field"), help: "A field's type, as name:type (repeatable).") var fields: [String] = []
    @Option(name: .customLong("id-field"), help: "The field whose value names each record.") var idField: String?
    @Option(name: .customLong("batch-size"), help: "Records per operation (1…400).") var batchSize = 400
    @Option(help: "Batches in flight.") var parallel = 8
    @Option(name: .customLong("on-error"), help: "What a bad row does: fail (nothing is imported) or skip.") var onError = "fail"
    @Option(help: "The state file (default: FILE.cirrus-import).") var state: String?
    @Flag(help: "Finish an interrupted import of FILE.") var resume = false
    @Flag(help: "Forget an interrupted import of FILE and start over.") var restart = false
    @Option(help: "auto (a bar on a terminal), bar, json (a JSON line a second on stderr) or none.")
    var progress: ProgressStyle = .auto

    var optionsGiven: Bool {
        self.recordType != nil || self.format != nil || !self.fields.isEmpty || self.idField != nil
    }

    func options() throws(CLIError) -> ImportOptions {
        var options = ImportOptions()
        options.recordType = self.recordType
        options.zoneName = self.location.zone
        options.database = self.location.database.rawValue
        if let format = self.format {
            guard let parsed = ImportFormat(rawValue: format) else { throw CLIError.usage("--format '\(format)': jsonl or csv") }
            options.format = parsed
        } else {
            guard let parsed = ImportFormat(path: self.file) else {
                throw CLIError.usage("\(self.file): cannot tell the format from the name; add --format jsonl or --format csv")
            }
            options.format = parsed
        }
        var specifications: [FieldSpecification] = []
        for field in self.fields {
            specifications.append(try FieldSpecification(parsing: field))
        }
        options.fields = specifications
        options.idField = self.idField
        guard (1...400).contains(self.batchSize) else { throw CLIError.usage("--batch-size must be between 1 and 400") }
        options.batchSize = self.batchSize
        guard ["fail", "skip"].contains(self.onError) else { throw CLIError.usage("--on-error '\(self.onError)': fail or skip") }
        options.onError = self.onError
        return options
    }

    func run() async throws {
        guard self.parallel >= 1 else { throw CLIError.usage("--parallel must be at least 1") }
        guard !(self.resume && self.restart) else { throw CLIError.usage("--resume and --restart exclude each other") }
        guard FileManager.default.isReadableFile(atPath: self.file) else {
            throw CLIError.usage("\(self.file): no such file or not readable")
        }
        let options = try self.options()
        let container = try self.connection.makeContainer()
        let database = self.location.database(of: container)
        let importer = Importer(container: container, database: database, parallel: self.parallel)
        let reporter = ProgressReporter(style: self.progress, unit: "rows", isTerminal: Terminal.isInteractive) { text in
            FileHandle.standardError.write(Data(text.utf8))
        }
        let summary = try await importer.run(
            inputPath: self.file,
            options: self.resume && !self.optionsGiven ? nil : options,
            statePath: self.state,
            resume: self.resume,
            restart: self.restart
        ) { progress in
            reporter.update(done: progress.rowsDone, total: progress.rowsTotal)
        }
        reporter.finish(done: summary.rows, total: summary.rows)
        // The last batches' acknowledgements are sent as their results arrive: a Ping after
        // them, answered after the server read them, keeps the process from exiting before
        // they left (the server would list those batches as completed, unacknowledged).
        try? await container.ping()
        for row in summary.skipped {
            Terminal.note("skipped \(row)")
        }
        for row in summary.failed {
            Terminal.note("failed \(row)")
        }
        var line = "imported \(summary.saved) of \(summary.rows) rows into \(options.zoneName) in \(BenchDuration.format(summary.elapsed))"
            + " (\(Int(summary.rowsPerSecond.rounded())) rows/s, \(summary.batches) batches"
        if summary.reattached > 0 || summary.resent > 0 {
            line += ", \(summary.reattached) re-attached, \(summary.resent) sent again"
        }
        line += ")"
        if !summary.skipped.isEmpty { line += "; \(summary.skipped.count) bad rows skipped" }
        if !summary.failed.isEmpty { line += "; \(summary.failed.count) rows failed" }
        print(line)
        if !summary.skipped.isEmpty || !summary.failed.isEmpty {
            throw ExitCode(CLIExitCode.failure.rawValue)
        }
    }
}

struct Export: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Write a zone's records as JSON Lines (what `cirrus import` reads).",
        discussion: """
            Without --record-type every record of the zone, from its change feed (private \
            database); with it, a query for that type (either database). Each line holds \
            $recordName, $recordType and the fields; dates, bytes, locations, references and \
            assets are tagged ({"$date": …} …) so an import reads them back as the same types.
            """
    )

    @OptionGroup var connection: ConnectionOptions
    @OptionGroup var location: LocationOptions
    @Option(name: .customLong("record-type"), help: "Only records of this type (by query).") var recordType: String?
    @Option(name: [.short, .long], help: "Write to this file instead of stdout.") var output: String?
    @Option(
        help: ArgumentHelp(
            "Write each asset's file into this directory (named by its content) and name those files in the lines.",
            discussion: "Without it the lines name the files the assets were downloaded to (a cache the client may clear)."))
    var assets: String?
    @Option(help: "auto (a line on a terminal), bar, json (a JSON line a second on stderr) or none.")
    var progress: ProgressStyle = .auto

    func run() async throws {
        let handle: FileHandle
        if let output = self.output {
            guard FileManager.default.createFile(atPath: output, contents: nil), let opened = FileHandle(forWritingAtPath: output) else {
                throw CLIError.usage("--output \(output): cannot be written")
            }
            handle = opened
        } else {
            handle = FileHandle.standardOutput
        }
        let container = try self.connection.makeContainer()
        let reporter = ProgressReporter(style: self.progress, unit: "records", isTerminal: Terminal.isInteractive) { text in
            FileHandle.standardError.write(Data(text.utf8))
        }
        let count = try await Exporter.export(
            database: self.location.database(of: container), zoneID: self.location.zoneID, recordType: self.recordType,
            writer: LineWriter(handle: handle), assetDirectory: self.assets.map { URL(fileURLWithPath: $0, isDirectory: true) },
            progress: { reporter.update(done: $0, total: nil) })
        reporter.finish(done: count, total: nil)
        if self.output != nil {
            Terminal.note("exported \(count) records")
        }
    }
}

extension ProgressStyle: ExpressibleByArgument {}
