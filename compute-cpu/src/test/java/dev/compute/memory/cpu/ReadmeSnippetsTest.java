package dev.compute.memory.cpu;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.memory.BudgetSpec;
import dev.compute.memory.BufferState;
import dev.compute.memory.DataType;
import dev.compute.memory.FileMapMode;
import dev.compute.memory.LeakDetectionLevel;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryEventListener;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.ViewScope;
import dev.compute.memory.OutOfMemoryReason;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.recording.AllocationTrace;
import dev.compute.memory.recording.RecordingOptions;
import dev.compute.memory.resource.LimitingResource;
import dev.compute.memory.simulated.SimulatedDiscreteBackend;
import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.zip.GZIPInputStream;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** The Java snippets of README.md, compute-core/README.md and compute-cpu/README.md, run on the CPU backend. */
class ReadmeSnippetsTest {

    @TempDir Path dir;

    @Test
    void rootAxpy() {
        int n = 1000;
        float[] xs = new float[n];
        float[] ys = new float[n];
        for (int i = 0; i < n; i++) { xs[i] = i; ys[i] = 1; }
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu").build()) {
            try (UnifiedBuffer x = memory.allocate(DataType.FLOAT32, n);
                 UnifiedBuffer y = memory.allocate(DataType.FLOAT32, n)) {
                x.copyFrom(xs);
                y.copyFrom(ys);
                memory.ops().axpy(2.0, x, y);
                y.copyTo(ys);
            }
        }
        assertThat(ys[10]).isEqualTo(21f);
    }

    @Test
    void coreWithoutSpring() {
        double[] values = new double[1_000_000];
        java.util.Arrays.fill(values, 0.5);
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder()
                .backend("auto")
                .maxPoolSize(8L << 30)
                .leakDetection(LeakDetectionLevel.SIMPLE)
                .build();
             UnifiedBuffer buffer = memory.allocate(DataType.FLOAT64, 1_000_000)) {
            buffer.copyFrom(values);
            double total = memory.ops().sum(buffer);
            assertThat(total).isEqualTo(500_000.0);
        }
    }

    @Test
    void coreChain() {
        AtomicInteger evictions = new AtomicInteger();
        AtomicInteger alerts = new AtomicInteger();
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu")
                .resourceAdaptor((upstream, location) -> new LimitingResource(upstream, location, 2L << 30, "search budget"))
                .outOfMemoryHandler((location, bytes, attempt, failure) -> { evictions.incrementAndGet(); return false; })
                .outOfMemoryRetries(3)
                .eventListener(new MemoryEventListener() {
                    @Override public void allocationFailed(MemoryLocation l, long bytes, OutOfMemoryReason reason) { alerts.incrementAndGet(); }
                })
                .build()) {
            try (UnifiedBuffer b = memory.allocate(1L << 20)) {
                assertThat(b.byteSize()).isEqualTo(1L << 20);
            }
        }
    }

    @Test
    void coreBudget() throws IOException {
        long n = 1000;
        Path weightsFile = dir.resolve("weights.bin");
        Files.write(weightsFile, new byte[4096]);
        try (UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").build()) {
            BudgetSpec tenantA = BudgetSpec.of("tenant-a", 1L << 30)
                    .withLocationLimit(MemoryLocation.HOST, 256L << 20)
                    .withReservation(MemoryLocation.DEVICE, 256L << 20);
            try (MemoryBudget tenant = manager.budget(tenantA);
                 MemoryBudget request = tenant.child("request-42", 64L << 20)) {
                UnifiedBuffer input = request.allocate(DataType.FLOAT32, n, MemoryLocation.DEVICE);
                Optional<UnifiedBuffer> scratch = request.tryAllocate(16L << 20, MemoryLocation.DEVICE);
                CompletableFuture<UnifiedBuffer> later = request.allocateAsync(32L << 20, MemoryLocation.DEVICE, Duration.ofSeconds(2));
                List<UnifiedBuffer> batch = request.allocateBatch(DataType.FLOAT32, new long[] {n, n}, MemoryLocation.DEVICE);
                UnifiedBuffer weights = request.mapFile(weightsFile, DataType.FLOAT32, FileMapMode.READ_ONLY);
                assertThat(scratch).isPresent();
                assertThat(later.join().byteSize()).isEqualTo(32L << 20);
                assertThat(batch).hasSize(2);
                assertThat(weights.byteSize()).isEqualTo(4096);
                assertThat(input.isClosed()).isFalse();
                assertThat(tenant.statistics().liveBuffers()).isGreaterThanOrEqualTo(5);
            }
            assertThat(manager.liveBuffers()).isEmpty();
        }
    }

    @Test
    void coreMappedFile() throws IOException {
        Path file = dir.resolve("embeddings.f32");
        java.nio.ByteBuffer bytes = java.nio.ByteBuffer.allocate(4 * 1024).order(java.nio.ByteOrder.nativeOrder());
        for (int i = 0; i < 1024; i++) bytes.putFloat(1f);
        Files.write(file, bytes.array());
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu").build()) {
            try (UnifiedBuffer embeddings = memory.mapFile(file, DataType.FLOAT32, FileMapMode.READ_ONLY);
                 UnifiedBuffer onDevice = memory.allocate(DataType.FLOAT32, embeddings.elementCount(), MemoryLocation.DEVICE)) {
                onDevice.copyFrom(embeddings);
                double total = memory.ops().sum(embeddings);
                assertThat(total).isEqualTo(1024.0);
                assertThat(memory.ops().sum(onDevice)).isEqualTo(1024.0);
                assertThat(embeddings.state()).isEqualTo(BufferState.SYNCHRONIZED);
                assertThat(embeddings.isReadOnly()).isTrue();
            }
        }
    }

    @Test
    void coreRecording() throws IOException {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu").build()) {
            memory.startRecording(new RecordingOptions(1_000_000, 0));
            memory.allocate(1000).close();
            AllocationTrace trace = memory.stopRecording();
            Path out = dir.resolve("service.csv.gz");
            trace.writeTo(out);
            try (InputStream in = new GZIPInputStream(Files.newInputStream(out))) {
                String text = new String(in.readAllBytes());
                assertThat(text).contains("a,").contains("f,");
            }
            assertThat(trace.events()).hasSize(2);
        }
    }

    @Test
    void coreSimulated() {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend(new SimulatedDiscreteBackend(64L << 20)).build()) {
            memory.allocate(1024, MemoryLocation.DEVICE).close();
        }
    }

    @Test
    void cpuSnippets() {
        float[] values = new float[1_000_000];
        java.util.Arrays.fill(values, 2f);
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu").build();
             UnifiedBuffer x = memory.allocate(DataType.FLOAT32, 1_000_000)) {
            x.copyFrom(values);
            memory.ops().scale(x, 0.5);
            double total = memory.ops().sum(x);
            assertThat(total).isEqualTo(1_000_000.0);
        }
        UnifiedMemoryManager.builder().backend("cpu").backendOption("pinned-fallback", "fail").build().close();
    }

    /**
     * Root README, "A closed buffer's memory comes back when the work that viewed it ends": elsewhere than in the
     * starter's requests and tasks, wrap work in {@code ViewScope.wrap(task)}; its views end with the task, so a buffer
     * another thread closes is back at once, never held.
     */
    @Test
    void aViewTakenInAWrappedTaskEndsWithTheTask() throws Exception {
        try (UnifiedMemoryManager memory = UnifiedMemoryManager.builder().backend("cpu").timelineInterval(Duration.ZERO).build()) {
            UnifiedBuffer buffer = memory.allocate(DataType.FLOAT32, 1024);
            buffer.copyFrom(new float[1024]);
            java.util.concurrent.atomic.AtomicReference<java.lang.foreign.MemorySegment> view = new java.util.concurrent.atomic.AtomicReference<>();
            ViewScope.wrap(() -> view.set(buffer.readOnlyHostView())).run();
            assertThatThrownBy(() -> view.get().get(java.lang.foreign.ValueLayout.JAVA_FLOAT, 0)).isInstanceOf(IllegalStateException.class);
            java.lang.foreign.MemorySegment fromCallable = ViewScope.wrap(buffer::hostView).call();
            assertThatThrownBy(() -> fromCallable.get(java.lang.foreign.ValueLayout.JAVA_FLOAT, 0)).isInstanceOf(IllegalStateException.class);
            Thread closer = new Thread(buffer::close);
            closer.start();
            closer.join();
            MemoryStatistics host = memory.statistics(MemoryLocation.HOST);
            assertThat(host.liveBuffers()).isZero();
            assertThat(host.heldBuffers()).isZero();
            assertThat(host.allocatedBytes()).isZero();
        }
    }
}
