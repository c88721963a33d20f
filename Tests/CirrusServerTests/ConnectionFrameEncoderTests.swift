import CirrusWire
import NIOCore
import NIOEmbedded
import Testing

@testable import CirrusServer

/// The server's frame encoder alone, on an `EmbeddedChannel`.
@Suite("Connection frame encoder: one buffer per flush")
struct ConnectionFrameEncoderTests {
    private func event(_ seq: UInt64, bytes: Int = 10) -> Wire.Frame {
        let record = Wire.Record(
            recordID: Wire.RecordID(recordName: "r\(seq + 100_000)"), recordType: "T",
            fields: [Wire.RecordField(key: "payload", value: Wire.FieldValue(kind: .bytesValue([UInt8](repeating: 7, count: bytes))))])
        let payload = Wire.Event.Payload.fetchRecords(
            Wire.FetchRecordsEvent(callback: .perRecordResult(Wire.RecordOutcome(recordID: record.recordID, outcome: .record(record)))))
        return Wire.Frame(streamID: 1, kind: .event(Wire.Event(seq: seq, payload: payload)))
    }

    /// Every frame in the buffers the encoder handed down, in order.
    private func frames(in buffers: [ByteBuffer]) throws -> [Wire.Frame] {
        var decoder = FrameDecoder()
        var all = buffers.reduce(into: ByteBuffer()) { all, buffer in
            var buffer = buffer
            all.writeBuffer(&buffer)
        }
        var frames: [Wire.Frame] = []
        while let frame = try decoder.decode(buffer: &all) {
            frames.append(frame)
        }
        #expect(all.readableBytes == 0)
        return frames
    }

    private func written(_ channel: EmbeddedChannel) throws -> [ByteBuffer] {
        var buffers: [ByteBuffer] = []
        while let buffer = try channel.readOutbound(as: ByteBuffer.self) {
            buffers.append(buffer)
        }
        return buffers
    }

    @Test func framesWrittenBetweenFlushesGoDownAsOneBuffer() throws {
        let encoder = ConnectionFrameEncoder(maximumFrameBytes: 1_000)
        let channel = EmbeddedChannel(handler: encoder)
        let promises = (1...3).map { _ in channel.eventLoop.makePromise(of: Void.self) }
        for (index, promise) in promises.enumerated() {
            channel.write(self.event(UInt64(index + 1)), promise: promise)
        }
        #expect(try self.written(channel).isEmpty, "nothing goes down before the flush")
        channel.flush()
        let buffers = try self.written(channel)
        #expect(buffers.count == 1)
        #expect(try self.frames(in: buffers) == (1...3).map { self.event(UInt64($0)) })
        for promise in promises {
            #expect(throws: Never.self) { try promise.futureResult.wait() }
        }
        #expect(try channel.finish().isClean)
    }

    @Test func aFrameTooLargeFailsAloneAndTheOthersGoOut() throws {
        let encoder = ConnectionFrameEncoder(maximumFrameBytes: 500)
        let channel = EmbeddedChannel(handler: encoder)
        channel.write(self.event(1), promise: nil)
        let refused = channel.eventLoop.makePromise(of: Void.self)
        channel.write(self.event(2, bytes: 2_000), promise: refused)
        #expect(throws: WireError.self) { try refused.futureResult.wait() }
        let size = try #require(encoder.takeRefusedSize())
        #expect(size > 2_000)
        #expect(encoder.takeRefusedSize() == nil)
        channel.write(self.event(3), promise: nil)
        channel.flush()
        #expect(try self.frames(in: self.written(channel)) == [self.event(1), self.event(3)])
        #expect(try channel.finish().isClean)
    }

    @Test func aLargeBatchGoesDownBeforeTheFlush() throws {
        let counter = WriteCounter()
        let encoder = ConnectionFrameEncoder(maximumFrameBytes: 1 << 20)
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandlers([counter, encoder])
        // Frames of equal size (seqs below 128 and record names of one length).
        let frameBytes = self.event(1, bytes: 1_000).serializedSize + 4
        let fits = (ConnectionFrameEncoder.maximumBatchBytes - 1) / frameBytes
        for seq in 1...UInt64(fits) {
            channel.write(self.event(seq, bytes: 1_000), promise: nil)
        }
        #expect(counter.writes == 0)
        let perBatch = fits + 1
        for seq in UInt64(fits + 1)...UInt64(perBatch + 2) {
            channel.write(self.event(seq, bytes: 1_000), promise: nil)
        }
        #expect(counter.writes == 1, "the batch went down once it passed \(ConnectionFrameEncoder.maximumBatchBytes) bytes")
        channel.flush()
        #expect(counter.writes == 2)
        #expect(try self.frames(in: self.written(channel)) == (1...UInt64(perBatch + 2)).map { self.event($0, bytes: 1_000) })
        #expect(try channel.finish().isClean)
    }
}

/// Counts the writes that reach it.
private final class WriteCounter: ChannelOutboundHandler {
    typealias OutboundIn = ByteBuffer
    var writes = 0

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        self.writes += 1
        context.write(data, promise: promise)
    }
}
