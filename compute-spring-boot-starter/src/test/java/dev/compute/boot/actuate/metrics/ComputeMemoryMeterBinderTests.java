package dev.compute.boot.actuate.metrics;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.actuate.RecentMemoryStatistics;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import io.micrometer.prometheusmetrics.PrometheusConfig;
import io.micrometer.prometheusmetrics.PrometheusMeterRegistry;
import java.lang.reflect.Proxy;
import java.util.concurrent.atomic.LongAdder;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

class ComputeMemoryMeterBinderTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder()
            .backend(new SimulatedDiscreteBackend(64L << 20)).build();
    private final PrometheusMeterRegistry registry = new PrometheusMeterRegistry(PrometheusConfig.DEFAULT);

    @AfterEach
    void close() {
        manager.close();
        registry.close();
    }

    @Test
    void metersReadTheManagersStatisticsPerLocation() {
        new ComputeMemoryMeterBinder(manager, new RecentMemoryStatistics(manager)).bindTo(registry);
        try (UnifiedBuffer buffer = manager.allocate(DataType.FLOAT64, 4096, MemoryLocation.DEVICE)) {
            buffer.copyFrom(new double[4096]);
            buffer.copyTo(new double[4096]);
            MemoryStatistics device = manager.statistics(MemoryLocation.DEVICE);
            assertThat(registry.get("compute.memory.reserved").tags("location", "DEVICE", "backend", "simulated", "device", "0")
                    .gauge().value()).isEqualTo(device.reservedBytes());
            assertThat(registry.get("compute.memory.allocated").tag("location", "DEVICE").gauge().value()).isEqualTo(device.allocatedBytes());
            assertThat(registry.get("compute.memory.live.buffers").tag("location", "DEVICE").gauge().value()).isEqualTo(1);
            assertThat(registry.get("compute.memory.backend.allocations").tag("location", "DEVICE").functionCounter().count())
                    .isEqualTo(device.backendAllocations());
            assertThat(registry.get("compute.memory.copied").tags("location", "DEVICE", "direction", "host-to-device")
                    .functionCounter().count()).isEqualTo(4096 * 8);
            assertThat(registry.get("compute.memory.copied").tags("location", "DEVICE", "direction", "device-to-host")
                    .functionCounter().count()).isEqualTo(4096 * 8);
        }
        assertThat(registry.find("compute.memory.reserved").gauges()).hasSize(manager.locations().size());
        assertThat(registry.get("compute.memory.leaks").tags("backend", "simulated", "device", "0").functionCounter())
                .as("one leak count for the manager, without a location tag")
                .satisfies(leaks -> assertThat(leaks.getId().getTag("location")).isNull())
                .satisfies(leaks -> assertThat(leaks.count()).isEqualTo(manager.leaksDetected()).isZero());
    }

    @Test
    void prometheusNamesCarryTheirUnits() {
        new ComputeMemoryMeterBinder(manager, new RecentMemoryStatistics(manager)).bindTo(registry);
        manager.allocate(1 << 20, MemoryLocation.DEVICE).close();

        String scrape = registry.scrape();

        assertThat(scrape).contains("compute_memory_reserved_bytes{backend=\"simulated\",device=\"0\",location=\"DEVICE\"}")
                .contains("compute_memory_reserved_peak_bytes{").contains("compute_memory_allocated_bytes{")
                .contains("compute_memory_cached_bytes{").contains("compute_memory_fragmentation_ratio{")
                .contains("compute_memory_overhead_ratio{").contains("compute_memory_pool_hits_total{")
                .contains("compute_memory_pool_misses_total{").contains("compute_memory_backend_allocations_total{")
                .contains("compute_memory_oom_retries_total{").contains("compute_memory_trims_total{")
                .contains("compute_memory_copied_bytes_total{backend=\"simulated\",device=\"0\",direction=\"host-to-device\",location=\"DEVICE\"}")
                .contains("compute_memory_leaks_total{backend=\"simulated\",device=\"0\"} 0.0");
    }

    @Test
    void aScrapeOfEveryMeterCollectsTheFiguresOnce() {
        LongAdder collections = new LongAdder();
        UnifiedMemoryManager counted = (UnifiedMemoryManager) Proxy.newProxyInstance(getClass().getClassLoader(),
                new Class<?>[] {UnifiedMemoryManager.class}, (proxy, method, arguments) -> {
                    if (method.getName().equals("statistics")) {
                        collections.increment();
                    }
                    return method.invoke(manager, arguments);
                });
        new ComputeMemoryMeterBinder(counted, new RecentMemoryStatistics(counted)).bindTo(registry);

        String scrape = registry.scrape();

        assertThat(scrape).contains("compute_memory_segments{").contains("compute_memory_trims_total{");
        assertThat(collections.sum()).as("22 meters for each of %d locations, one collection", manager.locations().size()).isEqualTo(1);
    }

    @Test
    void metersReadNaNOnceTheManagerIsClosed() {
        new ComputeMemoryMeterBinder(manager, new RecentMemoryStatistics(manager)).bindTo(registry);
        manager.close();
        assertThat(registry.get("compute.memory.reserved").tag("location", "HOST").gauge().value()).isNaN();
        assertThat(registry.get("compute.memory.leaks").functionCounter().count()).isNaN();
    }
}
