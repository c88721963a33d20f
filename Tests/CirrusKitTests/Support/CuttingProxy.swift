import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

/// A TCP proxy on loopback between a client and a server that cuts connections on purpose:
/// fault injection for tests of reconnect-and-resume.
///
/// Each accepted connection is joined to a new connection to the target. `cutAfter` is asked,
/// per connection, after how many bytes from the server to the client the connection is cut
/// (both sides closed at once, mid-frame if the count falls there); nil = never. `cutAll()`
/// drops every open connection now.
///
/// For example:
/// ```swift
/// var generator = SplitMix64(seed: 7)
/// let proxy = try await CuttingProxy.start(targetPort: serverPort) { Int.random(in: 100...50_000) }
/// // point the client at proxy.port
/// ```
final class CuttingProxy: Sendable {
    let port: Int
    private let group: MultiThreadedEventLoopGroup
    private let listener: any Channel
    private let state: NIOLockedValueBox<State>

    private struct State {
        var open: [ObjectIdentifier: any Channel] = [:]
        var accepted = 0
        var cut = 0
        /// New connections are closed at once (the network is down).
        var refusing = false
    }

    /// Connections accepted so far.
    var acceptedCount: Int { state.withLockedValue { $0.accepted } }
    /// Connections cut on purpose so far (by `cutAfter` or `cutAll`).
    var cutCount: Int { state.withLockedValue { $0.cut } }

    private init(port: Int, group: MultiThreadedEventLoopGroup, listener: any Channel, state: NIOLockedValueBox<State>) {
        self.port = port
        self.group = group
        self.listener = listener
        self.state = state
    }

    static func start(
        targetPort: Int,
        cutAfter: @escaping @Sendable () -> Int?
    ) async throws -> CuttingProxy {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        let state = NIOLockedValueBox(State())
        let listener = try await ServerBootstrap(group: group)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.autoRead, value: false)
            .childChannelInitializer { inbound in
                let refusing = state.withLockedValue { state -> Bool in
                    if !state.refusing {
                        state.accepted += 1
                        state.open[ObjectIdentifier(inbound)] = inbound
                    }
                    return state.refusing
                }
                if refusing { return inbound.close() }
                inbound.closeFuture.whenComplete { _ in
                    _ = state.withLockedValue { $0.open.removeValue(forKey: ObjectIdentifier(inbound)) }
                }
                let budget = cutAfter()
                return ClientBootstrap(group: inbound.eventLoop)
                    .connect(host: "127.0.0.1", port: targetPort)
                    .flatMap { outbound in
                        let toClient = Glue(peer: inbound, budget: budget) {
                            state.withLockedValue { $0.cut += 1 }
                        }
                        let toServer = Glue(peer: outbound, budget: nil, onCut: {})
                        return outbound.pipeline.addHandler(toClient).flatMap {
                            inbound.pipeline.addHandler(toServer)
                        }.flatMap {
                            inbound.closeFuture.whenComplete { _ in outbound.close(promise: nil) }
                            outbound.closeFuture.whenComplete { _ in inbound.close(promise: nil) }
                            // Read the client only once its bytes have somewhere to go.
                            return inbound.setOption(.autoRead, value: true)
                        }
                    }
            }
            .bind(host: "127.0.0.1", port: 0)
            .get()
        return CuttingProxy(port: listener.localAddress?.port ?? 0, group: group, listener: listener, state: state)
    }

    /// While true, new connections are closed as soon as they are accepted.
    func refuseConnections(_ refusing: Bool) {
        state.withLockedValue { $0.refusing = refusing }
    }

    /// Cuts every open connection now.
    func cutAll() {
        let channels = state.withLockedValue { state -> [any Channel] in
            state.cut += state.open.count
            return Array(state.open.values)
        }
        for channel in channels { channel.close(promise: nil) }
    }

    func stop() async {
        try? await listener.close()
        cutAll()
        try? await group.shutdownGracefully()
    }
}

/// Forwards what one side reads to `peer`; after `budget` bytes (when set) it writes the
/// part that fits and closes both sides.
private final class Glue: ChannelInboundHandler, RemovableChannelHandler, Sendable {
    typealias InboundIn = ByteBuffer

    private let peer: any Channel
    private let budget: NIOLockedValueBox<Int?>
    private let onCut: @Sendable () -> Void

    init(peer: any Channel, budget: Int?, onCut: @escaping @Sendable () -> Void) {
        self.peer = peer
        self.budget = NIOLockedValueBox(budget)
        self.onCut = onCut
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = Self.unwrapInboundIn(data)
        // How much of this read may pass, and whether the budget is used up by it.
        let (allowed, exhausted) = budget.withLockedValue { budget -> (Int, Bool) in
            guard let remaining = budget else { return (buffer.readableBytes, false) }
            let take = min(remaining, buffer.readableBytes)
            budget = remaining - take
            return (take, remaining - take == 0)
        }
        guard exhausted else {
            peer.writeAndFlush(buffer, promise: nil)
            return
        }
        let head = buffer.readSlice(length: allowed) ?? ByteBuffer()
        let channel = context.channel
        let peer = self.peer
        self.onCut()
        peer.writeAndFlush(head).whenComplete { _ in
            peer.close(promise: nil)
            channel.close(promise: nil)
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        peer.close(promise: nil)
        context.fireChannelInactive()
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }
}
