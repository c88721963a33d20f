import CirrusServer
import Foundation
import Testing

@Suite("The Grafana dashboard")
struct DashboardTests {
    /// Every metric the dashboard queries is one the server exports, so a renamed metric
    /// cannot leave an empty panel behind.
    @Test func queriesOnlyMetricsTheServerExports() throws {
        let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let data = try Data(contentsOf: repository.appendingPathComponent("Deploy/grafana/cirrusd-dashboard.json"))
        let dashboard = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let panels = try #require(dashboard["panels"] as? [[String: Any]])
        let expressions = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
        #expect(expressions.count >= panels.count)

        let exported: Set<String> = [
            ServerMetrics.Name.connectionsAccepted, ServerMetrics.Name.connectionsRefused, ServerMetrics.Name.connectionsOpen,
            ServerMetrics.Name.tlsHandshakeFailures, ServerMetrics.Name.streamsOpened, ServerMetrics.Name.eventsSent,
            ServerMetrics.Name.bytesReceived, ServerMetrics.Name.bytesSent, ServerMetrics.Name.errors,
            ServerMetrics.Name.writeCommits, ServerMetrics.Name.writeCommitJobs, ServerMetrics.Name.writeCommitRecords,
            ServerMetrics.Name.writeCommitSeconds, ServerMetrics.Name.writeCommitCPUSeconds, ServerMetrics.Name.longLivedRunning, ServerMetrics.Name.watchesOpen,
            ServerMetrics.Name.operationSeconds, ServerMetrics.Name.maintenanceRuns, ServerMetrics.Name.maintenanceSeconds,
            ServerMetrics.Name.notificationDeliverySeconds, ServerMetrics.Name.processCPUSeconds,
        ]
        let pattern = try NSRegularExpression(pattern: "cirrus_[a-z_]+")
        var used: Set<String> = []
        for expression in expressions {
            let range = NSRange(expression.startIndex..., in: expression)
            for match in pattern.matches(in: expression, range: range) {
                guard let found = Range(match.range, in: expression) else { continue }
                var name = String(expression[found])
                for suffix in ["_bucket", "_sum", "_count"] where name.hasSuffix(suffix) && !exported.contains(name) {
                    name.removeLast(suffix.count)
                }
                used.insert(name)
            }
        }
        #expect(used.subtracting(exported).isEmpty, "not exported: \(used.subtracting(exported).sorted())")
        #expect(exported.subtracting(used).isEmpty, "no panel: \(exported.subtracting(used).sorted())")
    }
}
