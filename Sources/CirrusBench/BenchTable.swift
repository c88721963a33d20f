import Foundation

/// Renders a `BenchResult` as the table `cirrus bench` prints.
///
/// For example:
/// ```
/// modify ×1 record, 64 in flight, closed loop, 1 connection — 10,000 operations in 3.2s
///                ops/s   records/s   in/s       out/s
///   total        3,125   3,125       1.2 MB/s   0.9 MB/s
/// latency        p50      p90      p99      p99.9    max
///   total        19.1ms   24.0ms   31.3ms   45.0ms   51.2ms
/// cpu per operation: client 27.6µs, server 36.7µs (writer 14.2µs per item written, 17.9 items per commit)
/// errors: none
/// ```
public enum BenchTable {
    public static func render(_ result: BenchResult) -> String {
        var lines: [String] = []
        let settings = result.settings
        let loop = settings.rate.map { "open loop at \(number(Double($0)))/s" } ?? "closed loop"
        if result.mode == "handshakes" {
            lines.append(
                "handshakes (TCP + TLS 1.3 + Hello, a new connection each), \(settings.concurrency) in flight, \(loop)"
                    + " — \(number(Double(result.counts.operations))) in \(BenchDuration.format(result.elapsedSeconds))")
        } else {
            let what = settings.mix.weights.count == 1 ? settings.mix.description.replacingOccurrences(of: "=1", with: "") : "mix \(settings.mix)"
            let size: String
            switch settings.mix.weights.count == 1 ? settings.mix.weights.keys.first : nil {
            case .ping: size = ""
            case .stream: size = " ×\(number(Double(settings.eventsPerStream ?? 0))) events"
            case .upload:
                let records = settings.recordsPerOperation
                size = " ×\(records) record\(records == 1 ? "" : "s") with a \(bytes(Double(settings.assetBytes ?? 0))) asset each"
            case .download: size = " of a \(bytes(Double(settings.assetBytes ?? 0))) asset"
            default: size = " ×\(settings.recordsPerOperation) record\(settings.recordsPerOperation == 1 ? "" : "s")"
            }
            lines.append(
                "\(what)\(size), "
                    + "\(settings.concurrency) in flight, \(loop), \(settings.connections) connection\(settings.connections == 1 ? "" : "s"), "
                    + "\(settings.zones) zone\(settings.zones == 1 ? "" : "s") — \(number(Double(result.counts.operations))) operations in "
                    + BenchDuration.format(result.elapsedSeconds))
        }
        var throughput = [["", "ops/s", "records/s", "in/s", "out/s"]]
        throughput.append([
            "total", number(result.operationsPerSecond), number(result.recordsPerSecond),
            bytes(result.bytesInPerSecond) + "/s", bytes(result.bytesOutPerSecond) + "/s",
        ])
        var latency = [["latency", "p50", "p90", "p99", "p99.9", "max"]]
        latency.append(row("total", result.latency))
        if result.byKind.count > 1 {
            for kind in BenchOperationKind.allCases {
                guard let perKind = result.byKind[kind.rawValue] else { continue }
                let rate = result.elapsedSeconds > 0 ? Double(perKind.counts.operations) / result.elapsedSeconds : 0
                let records = result.elapsedSeconds > 0 ? Double(perKind.counts.records) / result.elapsedSeconds : 0
                throughput.append([kind.rawValue, number(rate), number(records), "", ""])
                latency.append(row(kind.rawValue, perKind.latency))
            }
        }
        lines += columns(throughput)
        lines += columns(latency)
        if let cpu = result.cpu, result.counts.operations > 0 {
            lines.append(Self.cpuLine(cpu))
        }
        if result.errorsByCode.isEmpty {
            lines.append("errors: none")
        } else {
            let sorted = result.errorsByCode.sorted { $0.value == $1.value ? $0.key < $1.key : $0.value > $1.value }
            let list = sorted.map { "\($0.key) \(number(Double($0.value)))" }.joined(separator: ", ")
            lines.append(
                "errors: \(number(Double(result.errorCount))) — \(list) (\(number(Double(result.counts.failedOperations)))"
                    + " operations failed, \(number(Double(result.counts.failedItems))) items)")
            for (code, _) in sorted {
                if let message = result.firstErrorMessages[code] {
                    lines.append("  first \(code): \(message)")
                }
            }
        }
        if settings.rate != nil {
            lines.append("started late (in-flight cap reached or client behind): \(number(Double(result.delayedStarts)))")
        }
        if result.warmup.operations > 0 {
            lines.append("warm-up: \(number(Double(result.warmup.operations))) operations (not counted above)")
        }
        return lines.joined(separator: "\n")
    }

    /// `cpu per operation: client 27.6µs, server 36.7µs (writer 14.2µs per item written, 17.9 items per commit)`.
    public static func cpuLine(_ cpu: BenchCPU) -> String {
        var line = "cpu per operation: client \(micro(cpu.clientMicrosecondsPerOperation))"
        if let server = cpu.serverMicrosecondsPerOperation {
            line += ", server \(micro(server))"
            if let writer = cpu.writerMicrosecondsPerItem {
                line += " (writer \(micro(writer)) per item written"
                if let items = cpu.itemsPerCommit { line += ", \(number(items)) items per commit" }
                line += ")"
            }
        } else if let error = cpu.serverMetricsError {
            line += "; server not measured: \(error)"
        }
        return line
    }

    /// A CPU time in µs as `27.6µs` or `5,343µs`.
    static func micro(_ microseconds: Double) -> String {
        microseconds < 1_000 ? String(format: "%.1fµs", microseconds) : number(microseconds) + "µs"
    }

    private static func row(_ name: String, _ latency: LatencySummary) -> [String] {
        [name, time(latency.p50), time(latency.p90), time(latency.p99), time(latency.p999), time(latency.max)]
    }

    private static func columns(_ rows: [[String]]) -> [String] {
        // Written out with its types: as one chain of maps it took the type checker 7.8 s.
        let columnCount: Int = rows.map { (row: [String]) -> Int in row.count }.max() ?? 0
        let widths: [Int] = (0..<columnCount).map { (column: Int) -> Int in
            var widest = 0
            for row in rows where column < row.count { widest = max(widest, row[column].count) }
            return widest
        }
        return rows.enumerated().map { index, row in
            let indent = index == 0 ? "" : "  "
            let cells = row.enumerated().map { column, cell in
                let width = widths[column] + (column == 0 && index == 0 ? 2 : 0)
                return cell.padding(toLength: max(width, cell.count), withPad: " ", startingAt: 0)
            }
            return (indent + cells.joined(separator: "   ")).replacingOccurrences(of: "\\s+$", with: "", options: .regularExpression)
        }
    }

    /// `1,234` or `12.5` (below 100).
    static func number(_ value: Double) -> String {
        if value < 100, value != value.rounded() {
            return String(format: "%.1f", value)
        }
        let formatter = NumberFormatter()
        formatter.numberStyle = .decimal
        formatter.maximumFractionDigits = 0
        formatter.locale = Locale(identifier: "en_US")
        return formatter.string(from: NSNumber(value: value.rounded())) ?? "\(Int(value))"
    }

    /// A latency in µs as `850µs`, `12.3ms` or `1.20s`.
    static func time(_ microseconds: UInt64) -> String {
        let value = Double(microseconds)
        if value < 1_000 { return "\(microseconds)µs" }
        if value < 1_000_000 { return String(format: "%.1fms", value / 1_000) }
        return String(format: "%.2fs", value / 1_000_000)
    }

    /// `812 B`, `12.4 KB`, `3.1 MB` (decimal units).
    static func bytes(_ value: Double) -> String {
        if value < 1_000 { return "\(Int(value)) B" }
        if value < 1_000_000 { return String(format: "%.1f KB", value / 1_000) }
        if value < 1_000_000_000 { return String(format: "%.1f MB", value / 1_000_000) }
        return String(format: "%.2f GB", value / 1_000_000_000)
    }
}
