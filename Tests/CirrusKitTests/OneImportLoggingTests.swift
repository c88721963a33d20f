import CirrusKit
import Testing

/// `import CirrusKit` alone is enough to give a container a logger (this file imports nothing
/// else on purpose).
@Suite("One import: the client's logger")
struct OneImportLoggingTests {
    @Test func aLoggerNeedsNoOtherImport() {
        var configuration = CirrusClientConfiguration()
        var logger = Logger(label: "sync") { label in StreamLogHandler.standardError(label: label) }
        logger.logLevel = .info
        configuration.logger = logger
        #expect(configuration.logger.label == "sync")
        #expect(configuration.logger.logLevel == .info)
    }
}
