// Text → `cirrus import`'s CSV reading: CSVParser (quotes, escapes, line ends), header and
// column type inference, record names, then each row's record.
import CirrusCLI
import FuzzSupport

@_cdecl("LLVMFuzzerInitialize")
public func initialize(_ argc: FuzzArgc, _ argv: FuzzArgv) -> CInt {
    SeedWriter.writeIfRequested { csvSeeds.map(SeedWriter.utf8) }
    return 0
}

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzCSVImport(_ start: UnsafeRawPointer?, _ count: Int) -> CInt {
    guard let text = FuzzInput.text(start, count) else { return 0 }
    for case .success(let row) in CSVParser.rows(text) {
        _ = row.cells.map(CSVParser.escape)
    }
    ImportFuzzing.run(text, format: .csv)
    return 0
}

private let csvSeeds = [
    "id,title,count\nn1,Groceries,3\nn2,Books,4\n",
    "id,title,rating,due\r\nn1,\"Milk, eggs\",4.5,2024-05-01T10:00:00Z\r\nn2,\"say \"\"hi\"\"\",-1e3,2024-05-02\r\n",
    "id,tags,place,folder\nn1,\"[\"\"home\"\",\"\"weekly\"\"]\",\"48.85,2.35\",folder-1\n",
    "id,blob,flag,empty\nn1,AAEC/w==,true,\nn2,,false,x\n",
    "title\n\"unterminated\n",
    "id,id\nn1,n1\nn1,n2\n",
    "a,b\n1\n1,2,3\n",
    "\u{FEFF}id,title\nn1,ünïcödé 🎉\n",
]
