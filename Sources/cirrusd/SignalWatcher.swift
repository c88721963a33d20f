import Dispatch
import Foundation

/// Runs `handler` each time one of `signals` arrives, instead of the default action.
final class SignalWatcher {
    private let sources: [any DispatchSourceSignal]

    init(signals: [Int32], handler: @escaping @Sendable () -> Void) {
        let queue = DispatchQueue(label: "cirrusd.signals")
        self.sources = signals.map { number in
            signal(number, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: number, queue: queue)
            source.setEventHandler(handler: handler)
            source.resume()
            return source
        }
    }

    func cancel() {
        for source in self.sources {
            source.cancel()
        }
    }
}
