import CoreMetrics
import Handoff
import Prometheus

/// swift-prometheus as the swift-metrics backend, with each family's `# HELP` text.
///
/// `PrometheusMetricsFactory` registers every swift-metrics handle without help text, and its
/// registry refuses (traps on) a second registration of a family with a different text, so the
/// text cannot be added beside it: this factory makes the same metrics in the same registry, with
/// the text of ``Handoff/MetricHelp``. Destroying a handle is the same as there.
struct DescribedMetricsFactory: MetricsFactory {
    let registry: PrometheusCollectorRegistry
    /// Histogram buckets per Timer label (the default ones for any other).
    var durationHistogramBuckets: [String: [Duration]] = [:]
    private let prometheus: PrometheusMetricsFactory

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
        prometheus = PrometheusMetricsFactory(registry: registry)
    }

    /// The help text of `name`: ``MetricHelp``'s, or for a family it does not know (none of ours;
    /// a library's, say), words that still satisfy Prometheus' tools and say where to look.
    static func help(_ name: String) -> String {
        MetricHelp.text(for: name) ?? "\(name) (no description in this build of handoff; see docs/operations.md)"
    }

    /// The family `name` with its help text, as the registry takes it.
    static func descriptor(_ name: String, help: String? = nil) -> MetricNameDescriptor {
        // The name whole, as the metric's name; no unit to append.
        MetricNameDescriptor(metricName: name, unitName: "", helpText: help ?? Self.help(name))
    }

    func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: Self.descriptor(label), labels: dimensions)
    }

    func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: Self.descriptor(label), labels: dimensions)
    }

    func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: Self.descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(
            descriptor: Self.descriptor(label), labels: dimensions, buckets: prometheus.defaultValueHistogramBuckets)
    }

    func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: Self.descriptor(label), labels: dimensions)
    }

    func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(
            descriptor: Self.descriptor(label), labels: dimensions,
            buckets: durationHistogramBuckets[label] ?? prometheus.defaultDurationHistogramBuckets)
    }

    func destroyCounter(_ handler: any CounterHandler) { prometheus.destroyCounter(handler) }
    func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) { prometheus.destroyFloatingPointCounter(handler) }
    func destroyRecorder(_ handler: any RecorderHandler) { prometheus.destroyRecorder(handler) }
    func destroyMeter(_ handler: any MeterHandler) { prometheus.destroyMeter(handler) }
    func destroyTimer(_ handler: any TimerHandler) { prometheus.destroyTimer(handler) }
}
