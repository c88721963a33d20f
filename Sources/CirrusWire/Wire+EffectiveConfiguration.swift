extension Wire.OperationConfiguration {
    /// This configuration's explicit values, and for each value it leaves unset, `group`'s:
    /// CloudKit's merge rule (an operation's explicit value, else its group's
    /// `defaultConfiguration` explicit value, else the default). Values neither sets stay unset.
    public func merged(over group: Wire.OperationConfiguration?) -> Wire.OperationConfiguration {
        guard let group else { return self }
        return Wire.OperationConfiguration(
            containerIdentifier: self.containerIdentifier ?? group.containerIdentifier,
            qualityOfService: self.qualityOfService ?? group.qualityOfService,
            allowsCellularAccess: self.allowsCellularAccess ?? group.allowsCellularAccess,
            isLongLived: self.isLongLived ?? group.isLongLived,
            timeoutIntervalForRequestMs: self.timeoutIntervalForRequestMs ?? group.timeoutIntervalForRequestMs,
            timeoutIntervalForResourceMs: self.timeoutIntervalForResourceMs ?? group.timeoutIntervalForResourceMs
        )
    }
}

extension Wire.Open {
    /// The `Open` as it runs: `configuration` merged over the group's default configuration
    /// (``Wire/OperationConfiguration/merged(over:)``), and `containerIdentifier` replaced by the
    /// configuration's container when it names one (`config.proto`: the configuration's container
    /// wins; the `Open`'s is the default). A server applies this once, when the `Open` arrives,
    /// so everything after it (the long-lived registry, the executors) reads effective values.
    public var effective: Wire.Open {
        var open = self
        let merged = (self.configuration ?? Wire.OperationConfiguration()).merged(over: self.group?.defaultConfiguration)
        open.configuration = merged == Wire.OperationConfiguration() ? self.configuration : merged
        if let container = merged.containerIdentifier, !container.isEmpty {
            open.containerIdentifier = container
        }
        return open
    }
}
