package dev.compute.boot.scope;

import static java.lang.foreign.ValueLayout.JAVA_FLOAT;
import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.DataType;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.web.bind.annotation.DeleteMapping;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestBody;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;

/**
 * The vector store of issue 27 over real HTTP: vectors stored in HOST buffers, searched through
 * {@code readOnlyHostView()} on request threads, deleted on whichever request thread serves the DELETE. With the
 * starter's request scope every view ends with its request, so once the deletes have answered, nothing is live and
 * nothing is held, however long Tomcat's workers then idle.
 */
@SpringBootTest(classes = VectorStoreScopeTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT,
        properties = {"compute.backend=cpu", "compute.memory.pooling.expandable-segments=false"})
class VectorStoreScopeTests {

    static final int DIMENSIONS = 128;

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    RestClient http;

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).build();
    }

    @Test
    void afterABurstOfSearchesAndTheDeletesNothingIsLiveOrHeldOnAnIdleServer() throws Exception {
        List<Long> ids = new ArrayList<>();
        for (int i = 0; i < 40; i++) {
            ids.add(http.post().uri("/vectors").body(vector(i)).retrieve().body(Long.class));
        }
        // searches from eight clients at once: views of every vector on many of Tomcat's workers
        ExecutorService clients = Executors.newFixedThreadPool(8);
        try {
            List<Future<Double>> searches = new ArrayList<>();
            for (int i = 0; i < 64; i++) {
                float[] query = vector(1000 + i);
                searches.add(clients.submit(() -> http.post().uri("/vectors/search").body(query).retrieve().body(Double.class)));
            }
            for (Future<Double> search : searches) {
                assertThat(search.get()).isFinite();
            }
            List<Future<?>> deletes = new ArrayList<>();
            for (long id : ids) {
                deletes.add(clients.submit(() -> http.delete().uri("/vectors/{id}", id).retrieve().toBodilessEntity()));
            }
            for (Future<?> delete : deletes) {
                delete.get();
            }
        } finally {
            clients.shutdownNow();
        }

        // the server is idle now: no request will come to make a worker call in again (a request's scope ends as its
        // worker finishes it, after the client has the response: a loaded machine may delay that, not more)
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
            assertThat(host.liveBuffers()).as("live").isZero();
            assertThat(host.heldBuffers()).as("held for views").isZero();
            assertThat(host.allocatedBytes()).isZero();
        });
        assertThat(manager.liveBuffers()).isEmpty();
    }

    @Test
    void aVectorSearchedOnOneWorkerAndDeletedOnAnotherIsGoneAtOnce() {
        long id = http.post().uri("/vectors").body(vector(7)).retrieve().body(Long.class);
        http.post().uri("/vectors/search").body(vector(8)).retrieve().body(Double.class);

        http.delete().uri("/vectors/{id}", id).retrieve().toBodilessEntity();

        MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
        assertThat(host.liveBuffers()).isZero();
        assertThat(host.heldBuffers()).isZero();
    }

    private static float[] vector(int seed) {
        float[] values = new float[DIMENSIONS];
        for (int i = 0; i < DIMENSIONS; i++) {
            values[i] = (float) Math.sin(seed * 31 + i);
        }
        return values;
    }

    @SpringBootConfiguration
    @EnableAutoConfigurationWithoutSecurity
    @Import(VectorStore.class)
    static class Application {}

    /** As the held-out application wrote it from the README: views for reading, close on delete. */
    @RestController
    static class VectorStore {
        private final UnifiedMemoryManager memory;
        private final Map<Long, UnifiedBuffer> vectors = new ConcurrentHashMap<>();
        private final AtomicLong ids = new AtomicLong();

        VectorStore(UnifiedMemoryManager memory) {
            this.memory = memory;
        }

        @PostMapping("/vectors")
        long add(@RequestBody float[] values) {
            UnifiedBuffer buffer = memory.allocate(DataType.FLOAT32, values.length, MemoryLocation.HOST);
            buffer.copyFrom(values);
            norm(buffer.readOnlyHostView()); // a view on the allocating thread too
            long id = ids.incrementAndGet();
            vectors.put(id, buffer);
            return id;
        }

        @PostMapping("/vectors/search")
        double search(@RequestBody float[] query) {
            double best = Double.NEGATIVE_INFINITY;
            for (UnifiedBuffer vector : Set.copyOf(vectors.values())) {
                try {
                    best = Math.max(best, dot(vector.readOnlyHostView(), query));
                } catch (IllegalStateException closedMeanwhile) {
                    // deleted by another request while this one searched: skip it
                }
            }
            return best == Double.NEGATIVE_INFINITY ? 0 : best;
        }

        @DeleteMapping("/vectors/{id}")
        void delete(@PathVariable long id) {
            UnifiedBuffer buffer = vectors.remove(id);
            if (buffer != null) {
                buffer.close();
            }
        }

        @GetMapping("/vectors/count")
        int count() {
            return vectors.size();
        }

        private static double dot(MemorySegment vector, float[] query) {
            double sum = 0;
            for (int i = 0; i < query.length; i++) {
                sum += vector.getAtIndex(JAVA_FLOAT, i) * query[i];
            }
            return sum;
        }

        private static double norm(MemorySegment vector) {
            double sum = 0;
            for (long i = 0; i < vector.byteSize() / Float.BYTES; i++) {
                float v = vector.getAtIndex(JAVA_FLOAT, i);
                sum += v * v;
            }
            return Math.sqrt(sum);
        }
    }
}
