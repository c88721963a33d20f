import CirrusBench
import CirrusCLI
import CirrusKit
import CirrusModel
import Foundation
import Histogram
import Testing

@Suite("CSV and JSON Lines parsing, type inference")
struct ParsingTests {
    @Test func csvQuotesCommasLineBreaksAndBlankLines() throws {
        let rows = CSVParser.rows("a,b\r\n\"x, y\",\"say \"\"hi\"\"\"\n\n\"two\nlines\",z\n")
        let parsed = try rows.map { try $0.get() }
        #expect(parsed.map(\.cells) == [["a", "b"], ["x, y", "say \"hi\""], ["two\nlines", "z"]])
        #expect(parsed.map(\.line) == [1, 2, 4])
    }

    @Test func csvErrorsCarryTheirLine() {
        let rows = CSVParser.rows("a,b\nx\"y,1\n\"ok\"junk,2\n3,4\n\"open,5\n")
        let failures = rows.compactMap { if case .failure(let e) = $0 { e } else { nil } }
        #expect(failures.map(\.line) == [2, 3, 5])
        #expect(failures[2].message.contains("not closed"))
    }

    @Test func jsonKeepsIntegersApartFromDoubles() throws {
        let value = try JSONParser.parse(#"{"a": 3, "b": 3.0, "c": -1e2, "d": "\u00e9\n", "e": [true, null], "f": 9223372036854775808}"#)
        #expect(value["a"] == .integer(3))
        #expect(value["b"] == .double(3))
        #expect(value["c"] == .double(-100))
        #expect(value["d"] == .string("é\n"))
        #expect(value["e"] == .array([.bool(true), .null]))
        #expect(value["f"] == .double(9_223_372_036_854_775_808))
        #expect(try JSONParser.parse(value.jsonText) == value)
    }

    @Test(arguments: [
        ("{\"a\": }", "unexpected character"), ("{\"a\": 1", "expected ','"), ("[1,]", "unexpected character"),
        ("{\"a\": 01}", "expected ','"), ("{\"a\": 1} x", "unexpected text"), ("{\"a\":1,\"a\":2}", "appears twice"),
        ("\"abc", "unterminated"), (String(repeating: "[", count: 70), "nested deeper"),
    ])
    func malformedJSONIsRefusedWithAReason(text: String, reason: String) {
        #expect {
            _ = try JSONParser.parse(text)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test func csvColumnTypesAreInferredFromEveryCell() {
        let converter = FieldConverter(zoneID: .default)
        #expect(converter.inferType(ofColumn: ["1", "", "-7"]) == .int)
        #expect(converter.inferType(ofColumn: ["1", "2.5"]) == .double)
        #expect(converter.inferType(ofColumn: ["true", "FALSE"]) == .bool)
        #expect(converter.inferType(ofColumn: ["2024-01-02", "2024-01-03T10:00:00Z"]) == .date)
        #expect(converter.inferType(ofColumn: ["1", "x"]) == .string)
        #expect(converter.inferType(ofColumn: ["nan", "1"]) == .string)
        #expect(converter.inferType(ofColumn: ["", ""]) == .string)
    }

    @Test func fieldSpecificationsParseAndRefuseUnknownTypes() throws {
        #expect(try FieldSpecification(parsing: "tags:[string]").type == .list(.string))
        #expect(try FieldSpecification(parsing: "at:date").type == .date)
        #expect(throws: CLIError.self) { try FieldSpecification(parsing: "x:money") }
        #expect(throws: CLIError.self) { try FieldSpecification(parsing: "nocolon") }
        #expect(throws: CLIError.self) { try FieldSpecification(parsing: "l:[[int]]") }
    }

    @Test func jsonLinesRowsBecomeTypedRecordsAndBadRowsKeepTheirLine() throws {
        var options = ImportOptions()
        options.recordType = "Item"
        options.fields = [FieldSpecification(name: "when", type: .date), FieldSpecification(name: "n", type: .int)]
        let text = """
            {"name": "a", "n": 1, "when": "2024-05-01T10:00:00Z", "tags": ["x", "y"], "at": {"$location": {"latitude": 1, "longitude": 2}}}
            {"name": "b", "n": "seven"}

            not json
            {"name": "c", "n": 3, "blob": {"$bytes": "AAEC"}, "score": 2.0}
            [1, 2]
            {"name": "d", "when": "yesterday"}
            """
        let source = ImportSource(text: text, options: options, importID: "imp", baseDirectory: URL(fileURLWithPath: "/"))
        #expect(source.rows.map(\.line) == [1, 5])
        #expect(source.badRows.map(\.line) == [2, 4, 6, 7])
        #expect(source.badRows[0].message.contains("\"seven\" is not an int"))
        #expect(source.badRows[1].message.contains("malformed JSON"))
        #expect(source.badRows[3].message.contains("field 'when'"))
        let first = source.record(for: source.rows[0])
        #expect(first.recordID.recordName == "imp-1")
        #expect(first["n"] as? Int == 1)
        #expect(first["when"] as? Date == Date(timeIntervalSince1970: 1_714_557_600))
        #expect(first["tags"] as? [String] == ["x", "y"])
        #expect((first["at"] as? CKLocation)?.latitude == 1)
        let second = source.record(for: source.rows[1])
        #expect(second["blob"] as? Data == Data([0, 1, 2]))
        #expect((second["score"] as? NSNumber).map { String(cString: $0.objCType) } == "d")
        // What export writes reads back the same.
        let converter = FieldConverter(zoneID: .default)
        let line = RecordJSON.object(second, converter: converter).jsonText
        #expect(line == #"{"$recordName":"imp-5","$recordType":"Item","blob":{"$bytes":"AAEC"},"n":3,"name":"c","score":2.0}"#)
    }

    /// Lines end with "\n" or "\r\n" ("\r\n" is one Character in Swift, so the split is on bytes);
    /// strings with and without escapes read the same.
    @Test func jsonLinesEndingInCRLFAreRowsOfTheirOwn() throws {
        var options = ImportOptions()
        options.format = .jsonl
        options.recordType = "Item"
        let text = "{\"s\": \"plain é\"}\r\n{\"s\": \"tab\\there \\u00e9\"}\r\n\r\n{\"s\": \"last\"}\n"
        let source = ImportSource(text: text, options: options, importID: "imp", baseDirectory: URL(fileURLWithPath: "/"))
        #expect(source.badRows.isEmpty, "\(source.badRows.map(\.message))")
        #expect(source.rows.map(\.line) == [1, 2, 4])
        #expect(source.record(for: source.rows[0])["s"] as? String == "plain é")
        #expect(source.record(for: source.rows[1])["s"] as? String == "tab\there é")
        #expect(source.record(for: source.rows[2])["s"] as? String == "last")
        #expect(throws: JSONParseError.self) { try JSONParser.parse("\"raw \u{01} control\"") }
    }

    /// A file long enough to be read in parts on several cores reads as one read line by line:
    /// every row and bad row with its own line number, in file order, and a name taken in one
    /// part refused in a later one.
    @Test func aLongFileReadInPartsKeepsTheOrderAndTheLineNumbers() throws {
        var options = ImportOptions()
        options.format = .jsonl
        options.recordType = "Item"
        let count = 5 * ImportSource.linesPerPart + 17
        var lines: [String] = []
        var expectedRows: [(line: Int, name: String)] = []
        var expectedBad: [(line: Int, message: String)] = []
        var firstDuplicate: Int?
        for line in 1...count {
            if line % 97 == 0 {
                lines.append("not json")
                expectedBad.append((line, "malformed JSON"))
            } else if line % 101 == 0 {
                lines.append("  ")
            } else if line % 89 == 0 {
                lines.append(#"{"$recordName": "dup", "n": \#(line)}"#)
                if let first = firstDuplicate {
                    expectedBad.append((line, "already used on line \(first)"))
                } else {
                    firstDuplicate = line
                    expectedRows.append((line, "dup"))
                }
            } else if line % 83 == 0 {
                lines.append(#"{"n": "seven"}"#)
                expectedBad.append((line, "\"seven\" is not an int"))
            } else {
                lines.append(#"{"n": \#(line)}"#)
                expectedRows.append((line, "imp-\(line)"))
            }
        }
        options.fields = [FieldSpecification(name: "n", type: .int)]
        let source = ImportSource(
            text: lines.joined(separator: "\n"), options: options, importID: "imp", baseDirectory: URL(fileURLWithPath: "/"))
        #expect(source.rows.map(\.line) == expectedRows.map(\.line))
        #expect(source.rows.map(\.recordName) == expectedRows.map(\.name))
        #expect(source.badRows.map(\.line) == expectedBad.map(\.line))
        for (row, expected) in zip(source.badRows, expectedBad) {
            #expect(row.message.contains(expected.message), "line \(row.line): \(row.message)")
        }
        for row in source.rows {
            #expect(source.record(for: row)["n"] as? Int == row.line)
        }
    }

    /// The parts cover every index once, in order, whatever the count.
    @Test(arguments: [0, 1, 999, 1_000, 1_999, 2_000, 2_001, 10_007])
    func readingInPartsCoversEveryIndexInOrder(count: Int) {
        #expect(ImportSource.readConcurrently(count: count) { Array($0) } == Array(0..<count))
    }

    @Test func csvRowsUseTheHeaderAndDeclaredTypes() throws {
        var options = ImportOptions()
        options.format = .csv
        options.recordType = "P"
        options.idField = "id"
        options.fields = [FieldSpecification(name: "zip", type: .string)]
        let text = "id,zip,age,tags\nx1,02134,30,a;b\nx2,1,old,c\nx1,3,4,d\nx4,5\n"
        let source = ImportSource(text: text, options: options, importID: "imp", baseDirectory: URL(fileURLWithPath: "/"))
        #expect(source.inferredTypes["age"] == .string, "one cell of age is not a number")
        #expect(source.rows.map(\.recordName) == ["x1", "x2"])
        #expect(source.badRows.map(\.line) == [4, 5])
        #expect(source.badRows[0].message.contains("already used on line 2"))
        #expect(source.badRows[1].message.contains("2 cells where the header has 4"))
        let record = source.record(for: source.rows[0])
        #expect(record["zip"] as? String == "02134")
        #expect(record["tags"] as? String == "a;b")
    }

    @Test func csvWithoutAHeaderOrWithABadOneFailsAtLineOne() {
        var options = ImportOptions()
        options.format = .csv
        options.recordType = "P"
        let empty = ImportSource(text: "", options: options, importID: "i", baseDirectory: URL(fileURLWithPath: "/"))
        #expect(empty.badRows.map(\.line) == [1])
        let twice = ImportSource(text: "a,a\n1,2\n", options: options, importID: "i", baseDirectory: URL(fileURLWithPath: "/"))
        #expect(twice.badRows.first?.message.contains("twice") == true)
        #expect(twice.rows.isEmpty)
    }
}

@Suite("Bench settings, schedule and results")
struct BenchUnitTests {
    @Test func mixParsesWeightsAndRefusesNonsense() throws {
        let mix = try BenchMix(parsing: "modify=20, fetch=70,query=10")
        #expect(mix.weights == [.modify: 20, .fetch: 70, .query: 10])
        #expect(mix.description == "modify=20,fetch=70,query=10")
        let transport = try BenchMix(parsing: "stream=1,ping=3")
        #expect(transport.weights == [.ping: 3, .stream: 1])
        #expect(transport.description == "ping=3,stream=1")
        for bad in ["modify", "modify=0", "modify=-1", "frob=1", "modify=1,modify=2", "", "fetch=x"] {
            #expect(throws: BenchError.self, "\(bad)") { try BenchMix(parsing: bad) }
        }
    }

    @Test func durationsParse() {
        #expect(BenchDuration.seconds(parsing: "30s") == 30)
        #expect(BenchDuration.seconds(parsing: "500ms") == 0.5)
        #expect(BenchDuration.seconds(parsing: "1m30s") == 90)
        #expect(BenchDuration.seconds(parsing: "2h") == 7_200)
        #expect(BenchDuration.seconds(parsing: "2.5") == 2.5)
        for bad in ["", "s", "10x", "-1s", "1s2", "abc"] {
            #expect(BenchDuration.seconds(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func openLoopScheduleIsFixedInAdvance() {
        let schedule = OpenLoopSchedule(rate: 200)
        #expect(schedule.intendedOffset(of: 0) == 0)
        #expect(schedule.intendedOffset(of: 200) == 1)
        #expect(schedule.dueCount(within: 1) == 200)
        #expect(schedule.dueCount(within: 0.0051) == 2)
        #expect(schedule.dueCount(within: 0) == 0)
        // An operation that starts 30 ms after its slot is 30 ms late, whatever came before.
        #expect(abs(schedule.lateness(of: 10, actual: 0.08) - 0.03) < 1e-9)
        #expect(schedule.lateness(of: 10, actual: 0.01) == 0)
    }

    @Test func latencySummaryComesFromTheHistogram() {
        var histogram = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .three)
        for value in 1...1_000 { _ = histogram.record(UInt64(value)) }
        let summary = LatencySummary(histogram)
        #expect(summary.count == 1_000)
        #expect(summary.p50 == 500)
        #expect(summary.p90 == 900)
        #expect(summary.p99 == 990)
        #expect(summary.p999 == 999)
        #expect(summary.max == 1_000)
        #expect(LatencySummary(Histogram<UInt64>(highestTrackableValue: 10)).p99 == 0)
    }

    @Test func settingsAreChecked() {
        var configuration = BenchConfiguration(client: CirrusClientConfiguration())
        configuration.recordsPerOperation = 401
        #expect(throws: BenchError.self) { try configuration.validate() }
        configuration.recordsPerOperation = 1
        configuration.stop = .operations(0)
        #expect(throws: BenchError.self) { try configuration.validate() }
        configuration.stop = .duration(1)
        configuration.rate = 0
        #expect(throws: BenchError.self) { try configuration.validate() }
        configuration.rate = nil
        for events in [0, 1_000_001] {
            configuration.eventsPerStream = events
            #expect(throws: BenchError.self, "\(events)") { try configuration.validate() }
        }
        configuration.eventsPerStream = 1
        #expect(throws: Never.self) { try configuration.validate() }
    }

    @Test func spreadConnectionsStartAtEachServerInTurn() {
        var client = CirrusClientConfiguration()
        client.servers = ["a", "b", "c"].map { CirrusClientConfiguration.Server(host: $0, port: 7443) }
        var configuration = BenchConfiguration(client: client)
        func hosts(_ index: Int) -> [String] { configuration.client(forConnection: index).servers.map(\.host) }
        #expect(hosts(0) == ["a", "b", "c"] && hosts(1) == ["a", "b", "c"])
        configuration.spreadOverServers = true
        #expect(hosts(0) == ["a", "b", "c"])
        #expect(hosts(1) == ["b", "c", "a"])
        #expect(hosts(2) == ["c", "a", "b"])
        #expect(hosts(4) == ["b", "c", "a"])
    }
}
