import CirrusBench
import Foundation
import Testing

@Suite("cirrus bench: reading a server's metrics")
struct BenchMetricsTests {
    @Test func metricsAddressesParse() {
        #expect(BenchMetricsEndpoint(parsing: "127.0.0.1:9464") == BenchMetricsEndpoint(host: "127.0.0.1", port: 9464))
        #expect(BenchMetricsEndpoint(parsing: "[::1]:9464") == BenchMetricsEndpoint(host: "::1", port: 9464))
        #expect(BenchMetricsEndpoint(parsing: "[::1]:9464")?.description == "http://[::1]:9464/metrics")
        #expect(BenchMetricsEndpoint(parsing: "metrics.internal:80")?.description == "http://metrics.internal:80/metrics")
        for bad in ["", "9464", ":9464", "host:", "host:0", "host:65536", "host:-1", "host:x", "[::1:80", "[::1]9464", "::1:9464", "host:٣", "host:+80", "host: 80"] {
            #expect(BenchMetricsEndpoint(parsing: bad) == nil, "\(bad)")
        }
    }

    @Test func prometheusTextParsesSeriesWithAndWithoutLabels() {
        let text = """
            # HELP cirrus_process_cpu_seconds_total CPU
            # TYPE cirrus_process_cpu_seconds_total counter
            cirrus_process_cpu_seconds_total 12.5
            cirrus_write_commit_cpu_seconds_sum 3.25 1700000000000
            cirrus_streams_opened_total{kind="modify_records"} 40
            cirrus_errors_total{code="a b",level="x\\"} y"} 2
              indented_series 7
            cirrus_write_commit_records_bucket{le="+Inf"} +Inf
            not_a_number abc
            no_value
            nan_series NaN

            """
        let samples = PrometheusSamples(parsing: text)
        #expect(samples.value(of: "cirrus_process_cpu_seconds_total") == 12.5)
        #expect(samples.value(of: "cirrus_write_commit_cpu_seconds_sum") == 3.25, "a timestamp after the value")
        #expect(samples.values[#"cirrus_streams_opened_total{kind="modify_records"}"#] == 40)
        #expect(samples.value(of: "cirrus_streams_opened_total") == nil, "a labelled series is not the unlabelled one")
        #expect(samples.values[#"cirrus_errors_total{code="a b",level="x\"} y"}"#] == 2, "blanks and braces in quotes")
        #expect(samples.value(of: "indented_series") == 7)
        #expect(samples.values[#"cirrus_write_commit_records_bucket{le="+Inf"}"#] == .infinity)
        #expect(samples.value(of: "not_a_number") == nil)
        #expect(samples.value(of: "no_value") == nil)
        #expect(samples.value(of: "nan_series")?.isNaN == true)
        #expect(samples.values.count == 7)
    }

    @Test func theCPULineSaysWhatWasMeasured() throws {
        var cpu = BenchCPU(clientSeconds: 0.5, operations: 20_000)
        #expect(cpu.clientMicrosecondsPerOperation == 25)
        #expect(BenchTable.cpuLine(cpu) == "cpu per operation: client 25.0µs")
        cpu.serverSeconds = 0.8
        cpu.serverMicrosecondsPerOperation = 40
        #expect(BenchTable.cpuLine(cpu) == "cpu per operation: client 25.0µs, server 40.0µs")
        cpu.writerMicrosecondsPerItem = 14.25
        cpu.itemsPerCommit = 17.9
        #expect(
            BenchTable.cpuLine(cpu)
                == "cpu per operation: client 25.0µs, server 40.0µs (writer 14.2µs per item written, 17.9 items per commit)")
        var failed = BenchCPU(clientSeconds: 2, operations: 1_000)
        failed.serverMetricsError = "cannot connect to http://127.0.0.1:1/metrics: refused"
        #expect(
            BenchTable.cpuLine(failed)
                == "cpu per operation: client 2,000µs; server not measured: cannot connect to http://127.0.0.1:1/metrics: refused")
        #expect(BenchCPU(clientSeconds: 1, operations: 0).clientMicrosecondsPerOperation == 0)
    }
}
