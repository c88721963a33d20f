import CirrusTestSupport
import Foundation

/// Runs the `cirrusd` binary with `arguments` to completion, on a thread of its own (not the
/// cooperative pool); returns its exit status and what it printed (standard output and error
/// together).
func runCirrusd(_ arguments: [String], environment: [String: String]? = nil) async throws -> (status: Int32, output: String) {
    try await withCheckedThrowingContinuation { continuation in
        DispatchQueue.global().async {
            continuation.resume(
                with: Result {
                    let process = ChildProcess()
                    process.executableURL = CirrusdProcess.binary
                    process.arguments = arguments
                    if let environment { process.environment = environment }
                    return try process.runCapturingOutput()
                })
        }
    }
}
