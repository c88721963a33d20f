import Foundation
import Logging
import Synchronization
import Testing

@testable import CirrusOperations

@Suite("JSON log lines")
struct JSONLogHandlerTests {
    @Test func metadataOfTheLoggerAndTheCallLandInOneEscapedObject() throws {
        let lines = Mutex<[String]>([])
        var logger = Logger(label: "cirrusd") { label in
            JSONLogHandler(label: label) { line in lines.withLock { $0.append(line) } }
        }
        logger[metadataKey: "connection"] = "7"
        logger[metadataKey: "message"] = "not allowed to replace the message"
        logger.warning(
            "a \"quoted\"\nline\u{1}", metadata: ["user": "_alice", "ids": ["a", "b"], "nested": ["k": "v"]])
        let written = lines.withLock { $0 }
        #expect(written.count == 1)
        let line = try #require(written.first)
        #expect(line.hasSuffix("}\n"))
        #expect(!line.dropLast().contains("\n"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["message"] as? String == "a \"quoted\"\nline\u{1}")
        #expect(object["level"] as? String == "warning")
        #expect(object["label"] as? String == "cirrusd")
        #expect(object["connection"] as? String == "7")
        #expect(object["user"] as? String == "_alice")
        #expect(object["ids"] as? [String] == ["a", "b"])
        #expect((object["nested"] as? [String: String]) == ["k": "v"])
        #expect((object["source"] as? String)?.contains("JSONLogHandlerTests.swift:") == true)
        #expect((object["time"] as? String)?.hasSuffix("Z") == true)
    }
}
