import CirrusCLI
import Foundation
import Synchronization
import Testing

/// A clock the test moves by hand, and the output collected.
private final class Harness: Sendable {
    let instant = Mutex(ContinuousClock.now)
    let output = Mutex<[String]>([])

    func advance(_ duration: Duration) { self.instant.withLock { $0 += duration } }

    func reporter(_ style: ProgressStyle, unit: String = "rows", isTerminal: Bool = false) -> ProgressReporter {
        ProgressReporter(style: style, unit: unit, isTerminal: isTerminal, now: { self.instant.withLock { $0 } }) { text in
            self.output.withLock { $0.append(text) }
        }
    }

    var lines: [String] { self.output.withLock { $0 } }
}

@Suite("Import and export progress")
struct ProgressReporterTests {
    @Test func jsonLinesComeOncePerSecondWithRateAndETA() throws {
        let harness = Harness()
        let reporter = harness.reporter(.json)
        reporter.update(done: 0, total: 1000)
        for step in 1...20 {
            harness.advance(.milliseconds(250))
            reporter.update(done: step * 25, total: 1000)
        }
        reporter.finish(done: 1000, total: 1000)
        let lines = harness.lines
        // The first update, one a second over five seconds, and the end.
        #expect(lines.count == 7, "\(lines)")
        #expect(lines[0] == #"{"event":"progress","unit":"rows","done":0,"total":1000,"elapsedSeconds":0.0,"perSecond":0.0}"# + "\n")
        #expect(lines[1] == #"{"event":"progress","unit":"rows","done":100,"total":1000,"elapsedSeconds":1.0,"perSecond":100.0,"etaSeconds":9.0}"# + "\n")
        #expect(lines[6] == #"{"event":"done","unit":"rows","done":1000,"total":1000,"elapsedSeconds":5.0,"perSecond":200.0}"# + "\n")
        for line in lines {
            #expect((try? JSONSerialization.jsonObject(with: Data(line.utf8))) != nil, "\(line)")
        }
    }

    @Test func aResumedImportCountsOnlyThisRunsRowsInItsRate() {
        let harness = Harness()
        let reporter = harness.reporter(.json)
        reporter.update(done: 600, total: 1000)  // finished before the resume
        harness.advance(.seconds(2))
        reporter.update(done: 800, total: 1000)
        #expect(harness.lines.last?.contains(#""perSecond":100.0,"etaSeconds":2.0"#) == true, "\(harness.lines)")
    }

    @Test func aBarOnATerminalAndNothingElsewhere() {
        let terminal = Harness()
        let bar = terminal.reporter(.auto, isTerminal: true)
        bar.update(done: 0, total: 200)
        terminal.advance(.seconds(2))
        bar.update(done: 100, total: 200)
        terminal.advance(.milliseconds(10))
        bar.update(done: 101, total: 200)  // too soon to redraw
        bar.finish(done: 200, total: 200)
        #expect(
            terminal.lines == [
                "\r\u{1B}[2K[                              ] 0/200 rows  0 rows/s  ETA --:--",
                "\r\u{1B}[2K[###############               ] 100/200 rows  50 rows/s  ETA 0:02",
                "\r\u{1B}[2K",
            ])

        let pipe = Harness()
        let quiet = pipe.reporter(.auto, isTerminal: false)
        quiet.update(done: 1, total: 2)
        quiet.finish(done: 2, total: 2)
        #expect(pipe.lines.isEmpty)
    }

    @Test func anExportHasNoTotalAndSoNoETA() {
        let harness = Harness()
        let reporter = harness.reporter(.bar, unit: "records")
        reporter.update(done: 0, total: nil)
        harness.advance(.seconds(3723))
        reporter.update(done: 3723, total: nil)
        #expect(harness.lines.last == "\r\u{1B}[2K3723 records  1 records/s  1:02:03")
    }
}
