// Text → `cirrus import`'s JSON Lines reading: JSONParser on each line (numbers, escapes,
// surrogates, nesting), field conversion of the tagged values ($date, $location …), record
// names, then each row's record.
import CirrusCLI
import FuzzSupport

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: FuzzArgc, _ argv: FuzzArgv) -> CInt {
    SeedWriter.writeIfRequested { jsonlSeeds.map(SeedWriter.utf8) }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzJSONLImport(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let text = FuzzInput.text(start, count) else { return 0 }
    // Whatever parses must print as JSON that parses to the same value.
    if let value = try? JSONParser.parse(text) {
        guard let again = try? JSONParser.parse(value.jsonText), again == value else {
            fatalError("JSON does not survive printing: \(value)")
        }
    }
    ImportFuzzing.run(text, format: .jsonl)
    return 0
}

private let jsonlSeeds = [
    #"{"id":"n1","recordType":"Note","title":"Groceries","count":3}"# + "\n" + #"{"id":"n2","title":"Books","rating":4.5}"#,
    #"{"id":"n1","due":{"$date":"2024-05-01T10:00:00Z"},"place":{"$location":{"latitude":48.85,"longitude":2.35}}}"#,
    #"{"id":"n1","folder":{"$reference":"folder-1","action":"deleteSelf"},"blob":{"$bytes":"AAEC/w=="}}"#,
    #"{"id":"n1","tags":["home","weekly"],"scores":[1,2.5,-3e2],"flag":true,"nothing":null}"#,
    #"{"id":"n1","file":{"$asset":"missing.bin"},"esc":"\"\\\/\b\f\n\r\t\u00e9\ud83c\udf89"}"#,
    #"{"a":{"b":{"c":[[[{}]]]}}}"#,
    #"{"id":1}"# + "\n\n" + #"{"id":"dup"}"# + "\n" + #"{"id":"dup"}"#,
    #"[1,2,3]"#,
    #"{"n":-0.0,"big":123456789012345678901234567890,"small":1e-400}"#,
]
