/// Durations as the CLI takes them: `30s`, `500ms`, `2m`, `1h`, `1m30s`, or a bare number
/// of seconds (`2.5`).
public enum BenchDuration {
    /// The number of seconds `text` says; nil when it is not a duration or is negative.
    ///
    /// For example: `BenchDuration.seconds(parsing: "1m30s") == 90`.
    public static func seconds(parsing text: String) -> Double? {
        let text = text.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { return nil }
        if let plain = Double(text) {
            return plain >= 0 && plain.isFinite ? plain : nil
        }
        var total = 0.0
        var number = ""
        var index = text.startIndex
        var sawUnit = false
        while index < text.endIndex {
            let character = text[index]
            if character.isNumber || character == "." {
                number.append(character)
                index = text.index(after: index)
                continue
            }
            var unit = ""
            while index < text.endIndex, text[index].isLetter {
                unit.append(text[index])
                index = text.index(after: index)
            }
            guard let value = Double(number), value >= 0, value.isFinite else { return nil }
            let scale: Double
            switch unit {
            case "ms": scale = 0.001
            case "s": scale = 1
            case "m": scale = 60
            case "h": scale = 3_600
            case "d": scale = 86_400
            default: return nil
            }
            total += value * scale
            number = ""
            sawUnit = true
        }
        guard number.isEmpty, sawUnit else { return nil }
        return total
    }

    /// `seconds` as the CLI prints it: `850ms`, `12.3s`, `4m05s`, `1h02m`.
    public static func format(_ seconds: Double) -> String {
        if seconds < 1 { return "\(Int((seconds * 1_000).rounded()))ms" }
        if seconds < 60 { return String(format: "%.1fs", seconds) }
        let whole = Int(seconds.rounded())
        if whole < 3_600 { return String(format: "%dm%02ds", whole / 60, whole % 60) }
        return String(format: "%dh%02dm", whole / 3_600, (whole % 3_600) / 60)
    }
}

import Foundation
