import ArgumentParser

/// A length of time on the command line: a whole number with a unit, `s`, `m`, `h` or `d`
/// (`90s`, `15m`, `24h`, `30d`); a bare number is seconds.
struct DurationArgument: ExpressibleByArgument, CustomStringConvertible, Sendable {
    let seconds: Int64

    init(seconds: Int64) {
        self.seconds = seconds
    }

    init?(argument: String) {
        let units: [Character: Int64] = ["s": 1, "m": 60, "h": 3600, "d": 86_400]
        var digits = Substring(argument)
        var scale: Int64 = 1
        if let last = argument.last, let unit = units[last] {
            digits = digits.dropLast()
            scale = unit
        }
        guard let value = Int64(digits), value > 0 else { return nil }
        let (seconds, overflow) = value.multipliedReportingOverflow(by: scale)
        guard !overflow else { return nil }
        self.seconds = seconds
    }

    var description: String {
        for (unit, size) in [("d", Int64(86_400)), ("h", 3600), ("m", 60)] where self.seconds % size == 0 {
            return "\(self.seconds / size)\(unit)"
        }
        return "\(self.seconds)s"
    }

    var defaultValueDescription: String { self.description }
}
