import CirrusTestSupport
import CirrusWire
import NIOCore
import Testing

@Suite("Asset chunk frames sent from the buffer their content was read into")
struct AssetChunkFrameTests {
    /// Stream IDs, seqs, offsets and data sizes across every varint width that matters (1, 2,
    /// 3 and 10 bytes) and the defaults protobuf-c leaves out (offset 0, empty data).
    static let cases: [(streamID: UInt64, seq: UInt64, offset: UInt64, dataBytes: Int)] = [
        (1, 1, 0, 1), (7, 2, 1 << 20, 1 << 20), (0, 1, 5, 127), (300, 128, 127, 128),
        (.max, .max, .max, 16_383), (3, 0, 0, 0), (3, 1, 0, 16_384), (1 << 40, 9, 1 << 35, 2 << 20),
    ]

    @Test(arguments: Self.cases)
    func headerThenDataIsByteForByteTheEncodedFrame(
        _ frame: (streamID: UInt64, seq: UInt64, offset: UInt64, dataBytes: Int)
    ) throws {
        var random = SplitMix64(seed: UInt64(frame.dataBytes))
        let data = (0..<frame.dataBytes).map { _ in UInt8(truncatingIfNeeded: random.next()) }
        let chunk = Wire.AssetChunk(offset: frame.offset, data: data)
        let event = Wire.Event(seq: frame.seq, payload: .downloadAsset(Wire.DownloadAssetEvent(callback: .chunk(chunk))))
        var expected = ByteBuffer()
        try FrameEncoder.encode(Wire.Frame(streamID: frame.streamID, kind: .event(event)), into: &expected)

        var spliced = ByteBuffer()
        try FrameEncoder.encodeAssetChunkHeader(
            streamID: frame.streamID, seq: frame.seq, offset: frame.offset, dataBytes: data.count, into: &spliced)
        spliced.writeBytes(data)
        #expect(spliced == expected)
        #expect(
            FrameEncoder.assetChunkFrameBodySize(
                streamID: frame.streamID, seq: frame.seq, offset: frame.offset, dataBytes: data.count)
                == expected.readableBytes - 4)

        var decoder = FrameDecoder()
        #expect(try decoder.decode(buffer: &spliced) == Wire.Frame(streamID: frame.streamID, kind: .event(event)))
    }

    @Test func anOversizeChunkFrameIsRefusedAndWritesNothing() throws {
        var buffer = ByteBuffer(string: "kept")
        let size = FrameEncoder.assetChunkFrameBodySize(streamID: 3, seq: 1, offset: 0, dataBytes: 1 << 20)
        #expect(throws: WireError.self) {
            try FrameEncoder.encodeAssetChunkHeader(
                streamID: 3, seq: 1, offset: 0, dataBytes: 1 << 20, into: &buffer, maximumFrameBytes: size - 1)
        }
        #expect(buffer == ByteBuffer(string: "kept"))
        try FrameEncoder.encodeAssetChunkHeader(
            streamID: 3, seq: 1, offset: 0, dataBytes: 1 << 20, into: &buffer, maximumFrameBytes: size)
        #expect(buffer.readableBytes > 4)
    }
}
