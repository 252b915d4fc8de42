package dev.compute.boot.scope;

import static java.lang.foreign.ValueLayout.JAVA_BYTE;
import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.MemorySegment;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.scheduling.annotation.Async;
import org.springframework.scheduling.annotation.EnableAsync;
import org.springframework.scheduling.annotation.EnableScheduling;
import org.springframework.scheduling.annotation.Scheduled;
import org.springframework.stereotype.Service;
import org.springframework.web.bind.annotation.DeleteMapping;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PathVariable;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Issue 27 over real HTTP, on every kind of thread a Spring MVC application views buffers on: Tomcat's workers, Spring
 * MVC's asynchronous requests ({@code Callable}, {@code StreamingResponseBody}), {@code @Async} methods,
 * {@code @Scheduled} tasks and a servlet's {@code AsyncContext.start} tasks, on platform threads and on virtual ones. Buffers are viewed on all of them, some still
 * viewed while another request or a thread of the application's own closes them; once the server idles the memory is
 * back within a bound, and no figure ever counts a closed buffer as live meanwhile.
 */
class ViewsOnServerThreadsHttpTests {

    static final int BYTES = 64 * 1024;
    static final Duration BOUND = Duration.ofSeconds(5);

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT,
            properties = {"compute.backend=cpu", "compute.memory.held-memory-warning=0"})
    class OnPlatformThreads extends Scenarios {}

    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT,
            properties = {"compute.backend=cpu", "compute.memory.held-memory-warning=0", "spring.threads.virtual.enabled=true"})
    class OnVirtualThreads extends Scenarios {}

    abstract static class Scenarios {

        @LocalServerPort
        int port;

        @Autowired
        UnifiedMemoryManager manager;

        @Autowired
        Store store;

        RestClient http;

        @BeforeEach
        void client() {
            http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).build();
        }

        @Test
        void buffersViewedOnEveryKindOfThreadAndClosedWhileViewedAreBackOnceTheServerIdles() throws Exception {
            List<Long> ids = new ArrayList<>();
            for (int i = 0; i < 8; i++) {
                ids.add(http.post().uri("/buffers").retrieve().body(Long.class));
                ids.add(http.post().uri("/buffers/by-task").retrieve().body(Long.class));
            }
            for (long id : ids) { // every way of viewing, each ending before the buffer closes
                long expected = (long) BYTES * (id % 100);
                assertThat(http.get().uri("/buffers/{id}/sum", id).retrieve().body(Long.class)).isEqualTo(expected);
                assertThat(http.get().uri("/buffers/{id}/callable", id).retrieve().body(Long.class)).isEqualTo(expected);
                assertThat(http.get().uri("/buffers/{id}/async", id).retrieve().body(Long.class)).isEqualTo(expected);
                assertThat(http.get().uri("/buffers/{id}/stream", id).retrieve().body(byte[].class)).hasSize(BYTES);
            }
            store.awaitScheduledViews();

            // views held on workers, asynchronous requests' threads and @Async tasks while the buffers close (fewer than
            // Boot's executor has threads: a hold waits for the test, which waits for every hold)
            int held = 6;
            ExecutorService clients = Executors.newFixedThreadPool(held);
            try {
                List<Future<?>> holds = new ArrayList<>();
                for (int i = 0; i < held; i++) {
                    String how = List.of("hold", "hold-callable", "hold-async").get(i % 3);
                    long id = ids.get(i);
                    holds.add(clients.submit(() -> http.get().uri("/buffers/{id}/{how}", id, how).retrieve().toBodilessEntity()));
                }
                store.awaitHolding(held);
                for (int i = 0; i < ids.size(); i++) { // closed half on request threads, half on a thread of the application's
                    long id = ids.get(i);
                    if (i % 2 == 0) {
                        http.delete().uri("/buffers/{id}", id).retrieve().toBodilessEntity();
                    } else {
                        store.close(id);
                    }
                }
                MemoryStatistics whileHeld = manager.statistics(MemoryLocation.HOST);
                assertThat(whileHeld.liveBuffers()).as("every buffer is closed").isZero();
                assertThat(whileHeld.heldBuffers()).as("waiting for the views the holds still have").isPositive();
                store.letGo.countDown();
                for (Future<?> hold : holds) {
                    hold.get(BOUND.toSeconds(), TimeUnit.SECONDS);
                }
            } finally {
                store.letGo.countDown();
                clients.shutdownNow();
            }

            // the server idles now: no request or task calls in again; every scope ends as its thread finishes
            long deadline = System.nanoTime() + BOUND.toNanos();
            MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
            while (host.heldBuffers() > 0 && System.nanoTime() < deadline) {
                assertThat(host.liveBuffers()).as("a closed buffer counted live while its memory waits").isZero();
                assertThat(host.allocatedBytes()).isZero();
                Thread.sleep(10);
                host = manager.statistics(MemoryLocation.HOST);
            }
            assertThat(host.heldBuffers()).as("held past %s on an idle server", BOUND).isZero();
            assertThat(host.heldBytes()).isZero();
            assertThat(host.liveBuffers()).isZero();
            manager.releaseCachedMemory();
            assertThat(manager.statistics(MemoryLocation.HOST).reservedBytes()).as("back in the pool: a release gives it all back").isZero();
        }

        /**
         * A servlet's {@code AsyncContext.start(task)} runs the task on a container worker outside every filter: a buffer
         * allocated and viewed there, closed by a later request, waited for that worker's next request (held for good on
         * an idle server) until the request scope's filter started such tasks in scopes of their own.
         */
        @Test
        void aBufferAllocatedAndViewedInAnAsyncContextTaskIsBackOnceClosedElsewhere() throws Exception {
            long id = Long.parseLong(http.get().uri("/buffers/by-async-context").retrieve().body(String.class));

            http.delete().uri("/buffers/{id}", id).retrieve().toBodilessEntity();

            // the task's scope ends as the task returns, just after it completed the response
            long deadline = System.nanoTime() + BOUND.toNanos();
            MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
            while (host.heldBuffers() > 0 && System.nanoTime() < deadline) {
                assertThat(host.liveBuffers()).isZero();
                Thread.sleep(10);
                host = manager.statistics(MemoryLocation.HOST);
            }
            assertThat(host.heldBuffers()).as("held past %s on an idle server", BOUND).isZero();
            assertThat(host.liveBuffers()).isZero();
        }
    }

    /**
     * A request's view of a buffer another thread closes under it lasts until the request ends, through the request's
     * later calls into the manager; and a request that throws after viewing ends its views as it fails.
     */
    @Nested
    @SpringBootTest(classes = Application.class, webEnvironment = WebEnvironment.RANDOM_PORT,
            properties = {"compute.backend=cpu", "compute.memory.held-memory-warning=0"})
    class RequestsAndTheirViews {

        @LocalServerPort
        int port;

        @Autowired
        UnifiedMemoryManager manager;

        @Autowired
        Store store;

        @Test
        void aViewOutlivesItsRequestsLaterCallsAfterItsBufferClosedElsewhereAndAFailedRequestsViewsEndWithIt() throws Exception {
            RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).build();
            long id = http.post().uri("/buffers").retrieve().body(Long.class);
            ExecutorService client = Executors.newSingleThreadExecutor();
            try {
                Future<Long> sum = client.submit(() -> http.get().uri("/buffers/{id}/read-after-close-elsewhere", id).retrieve().body(Long.class));
                assertThat(store.viewing.await(BOUND.toSeconds(), TimeUnit.SECONDS)).isTrue();
                store.close(id);
                store.closedElsewhere.countDown();
                assertThat(sum.get(BOUND.toSeconds(), TimeUnit.SECONDS)).as("the view read the buffer's own bytes to the end")
                        .isEqualTo((long) BYTES * (id % 100));
            } finally {
                store.closedElsewhere.countDown();
                client.shutdownNow();
            }

            long failed = http.post().uri("/buffers").retrieve().body(Long.class);
            int status = http.get().uri("/buffers/{id}/view-and-fail", failed).exchange((request, response) -> response.getStatusCode().value());
            assertThat(status).isEqualTo(500);
            store.close(failed);

            long deadline = System.nanoTime() + BOUND.toNanos();
            MemoryStatistics host = manager.statistics(MemoryLocation.HOST);
            while (host.heldBuffers() > 0 && System.nanoTime() < deadline) { // the scheduled task's views end with its run
                assertThat(host.liveBuffers()).isZero();
                Thread.sleep(10);
                host = manager.statistics(MemoryLocation.HOST);
            }
            assertThat(host.heldBuffers()).as("held past %s", BOUND).isZero();
            assertThat(host.liveBuffers()).isZero();
        }
    }

    @SpringBootConfiguration
    @EnableAutoConfigurationWithoutSecurity
    @EnableAsync
    @EnableScheduling
    @Import({Store.class, Viewer.class})
    static class Application {}

    /** Sums a buffer's bytes through a view taken on the calling thread. */
    static long sum(UnifiedBuffer buffer) {
        MemorySegment view = buffer.readOnlyHostView();
        long sum = 0;
        for (long i = 0; i < view.byteSize(); i++) {
            sum += view.get(JAVA_BYTE, i);
        }
        return sum;
    }

    /** Sums as {@link #sum} does, then keeps the view until the test lets go: the buffer is closed meanwhile. */
    static long sumAndHold(Store store, UnifiedBuffer buffer) {
        long sum = sum(buffer);
        store.holding.incrementAndGet();
        try {
            store.letGo.await(BOUND.toSeconds(), TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return sum;
    }

    /** Buffers of {@code BYTES}, each filled with its id's last two digits through a view on the allocating thread. */
    @RestController
    static class Store {
        private final UnifiedMemoryManager memory;
        private final Viewer viewer;
        final Map<Long, UnifiedBuffer> buffers = new ConcurrentHashMap<>();
        private final AtomicLong ids = new AtomicLong();
        final AtomicLong holding = new AtomicLong();
        final AtomicLong scheduledViews = new AtomicLong();
        final CountDownLatch letGo = new CountDownLatch(1);

        Store(UnifiedMemoryManager memory, Viewer viewer) {
            this.memory = memory;
            this.viewer = viewer;
        }

        long allocate() {
            long id = ids.incrementAndGet();
            UnifiedBuffer buffer = memory.allocate(BYTES, MemoryLocation.HOST);
            buffer.hostView().fill((byte) (id % 100));
            buffers.put(id, buffer);
            return id;
        }

        @PostMapping("/buffers")
        long add() {
            return allocate();
        }

        @GetMapping("/buffers/by-async-context")
        void addOnAnAsyncContextTask(HttpServletRequest request) {
            AsyncContext async = request.startAsync();
            async.start(() -> {
                try {
                    async.getResponse().setContentType("text/plain");
                    async.getResponse().getWriter().write(Long.toString(allocate()));
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                } finally {
                    async.complete();
                }
            });
        }

        @PostMapping("/buffers/by-task")
        CompletableFuture<Long> addOnATask() {
            return viewer.allocate(this);
        }

        @GetMapping("/buffers/{id}/sum")
        long sumOnTheWorker(@PathVariable long id) {
            return sum(buffers.get(id));
        }

        @GetMapping("/buffers/{id}/callable")
        Callable<Long> sumOnAnAsyncRequest(@PathVariable long id) {
            return () -> sum(buffers.get(id));
        }

        @GetMapping("/buffers/{id}/async")
        CompletableFuture<Long> sumOnAnAsyncMethod(@PathVariable long id) {
            return viewer.sum(buffers.get(id));
        }

        @GetMapping("/buffers/{id}/stream")
        StreamingResponseBody stream(@PathVariable long id) {
            UnifiedBuffer buffer = buffers.get(id);
            return out -> out.write(buffer.readOnlyHostView().toArray(JAVA_BYTE));
        }

        @GetMapping("/buffers/{id}/hold")
        long holdOnTheWorker(@PathVariable long id) {
            return sumAndHold(this, buffers.get(id));
        }

        @GetMapping("/buffers/{id}/hold-callable")
        Callable<Long> holdOnAnAsyncRequest(@PathVariable long id) {
            return () -> sumAndHold(this, buffers.get(id));
        }

        @GetMapping("/buffers/{id}/hold-async")
        CompletableFuture<Long> holdOnAnAsyncMethod(@PathVariable long id) {
            return viewer.sumAndHold(this, buffers.get(id));
        }

        final CountDownLatch viewing = new CountDownLatch(1);
        final CountDownLatch closedElsewhere = new CountDownLatch(1);

        /** Views the buffer, waits while the test closes it, calls into the manager, then reads the view whole. */
        @GetMapping("/buffers/{id}/read-after-close-elsewhere")
        long readAfterCloseElsewhere(@PathVariable long id) throws InterruptedException {
            MemorySegment view = buffers.get(id).readOnlyHostView();
            viewing.countDown();
            closedElsewhere.await(BOUND.toSeconds(), TimeUnit.SECONDS);
            memory.allocate(BYTES, MemoryLocation.HOST).close();
            long sum = 0;
            for (long i = 0; i < view.byteSize(); i++) {
                sum += view.get(JAVA_BYTE, i);
            }
            return sum;
        }

        @GetMapping("/buffers/{id}/view-and-fail")
        long viewAndFail(@PathVariable long id) {
            sum(buffers.get(id));
            throw new IllegalStateException("the handler failed after viewing");
        }

        @DeleteMapping("/buffers/{id}")
        void delete(@PathVariable long id) {
            close(id);
        }

        void close(long id) {
            UnifiedBuffer buffer = buffers.remove(id);
            if (buffer != null) {
                buffer.close();
            }
        }

        /** Every buffer viewed by the scheduled task, which views whatever is stored every few milliseconds. */
        @Scheduled(fixedDelay = 20)
        void viewEveryBuffer() {
            for (UnifiedBuffer buffer : List.copyOf(buffers.values())) {
                try {
                    sum(buffer);
                    scheduledViews.incrementAndGet();
                } catch (IllegalStateException closedMeanwhile) {
                    // deleted while the task ran: skipped
                }
            }
        }

        void awaitScheduledViews() throws InterruptedException {
            long seen = scheduledViews.get();
            long deadline = System.nanoTime() + BOUND.toNanos();
            while (scheduledViews.get() < seen + 2L * buffers.size() && System.nanoTime() < deadline) {
                Thread.sleep(10);
            }
            assertThat(scheduledViews.get()).as("the scheduled task viewed every buffer").isGreaterThanOrEqualTo(seen + 2L * buffers.size());
        }

        void awaitHolding(int count) throws InterruptedException {
            long deadline = System.nanoTime() + BOUND.toNanos();
            while (holding.get() < count && System.nanoTime() < deadline) {
                Thread.sleep(5);
            }
            assertThat(holding.get()).as("views held while the buffers close").isEqualTo(count);
        }
    }

    /** The application's {@code @Async} methods: they run on Boot's task executor. */
    @Service
    public static class Viewer {
        @Async
        public CompletableFuture<Long> allocate(Store store) {
            return CompletableFuture.completedFuture(store.allocate());
        }

        @Async
        public CompletableFuture<Long> sum(UnifiedBuffer buffer) {
            return CompletableFuture.completedFuture(ViewsOnServerThreadsHttpTests.sum(buffer));
        }

        @Async
        public CompletableFuture<Long> sumAndHold(Store store, UnifiedBuffer buffer) {
            return CompletableFuture.completedFuture(ViewsOnServerThreadsHttpTests.sumAndHold(store, buffer));
        }
    }
}
