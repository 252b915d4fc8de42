package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.http.HttpServletRequest;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.lang.foreign.ValueLayout;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Import;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;
import org.springframework.web.context.request.async.DeferredResult;
import org.springframework.web.context.request.async.WebAsyncTask;
import org.springframework.web.servlet.mvc.method.annotation.StreamingResponseBody;

/**
 * Request budgets without task budgets: what Spring MVC runs on its task executor for the request (a {@code Callable}, a
 * {@code WebAsyncTask}, a {@code StreamingResponseBody}) and a task the request starts on its asynchronous context run
 * in the request's budget, as the request's own threads do.
 */
@ExtendWith(OutputCaptureExtension.class)
@SpringBootTest(classes = CallableRequestBudgetsHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=16MB",
        "compute.budgets.tenant-a.limit=8MB", "compute.budgets.tenant-a.request-limit=1MB", "compute.scopes.request-budgets=true"})
class CallableRequestBudgetsHttpTests {

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ComputeBudgets budgets;

    RestClient http;

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
    }

    private ResponseEntity<String> post(String path) {
        return http.post().uri(path).header("X-Compute-Budget", "tenant-a").retrieve().toEntity(String.class);
    }

    @Test
    void whatMvcRunsOnItsExecutorForTheRequestRunsInTheRequestsBudget(CapturedOutput output) {
        for (String kind : new String[] {"callable", "web-async-task", "streaming"}) {
            ResponseEntity<String> response = post("/" + kind + "?bytes=4096");
            assertThat(response.getStatusCode().value()).as(kind).isEqualTo(200);
            assertThat(response.getBody()).as(kind).matches("tenant-a/request-(\\d+) then tenant-a/request-\\1");
        }
        // what they forgot is closed with the request, and said so, with the request
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            MemoryBudget tenant = budgets.budget("tenant-a").orElseThrow();
            assertThat(tenant.children()).isEmpty();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
            assertThat(output).contains("request POST /streaming ended with 1 buffer(s) of 4096 bytes still open in memory budget 'tenant-a/request-");
        });
        // the executor's thread holds no budget once the request is done: a request without a tenant finds none
        for (int i = 0; i < 20; i++) {
            assertThat(http.post().uri("/callable?bytes=0").retrieve().body(String.class)).isEqualTo("none then none");
        }
    }

    @Test
    void aTaskTheRequestStartsOnItsAsyncContextRunsInTheRequestsBudget(CapturedOutput output) {
        ResponseEntity<String> response = post("/async-context?bytes=4096");
        assertThat(response.getStatusCode().value()).isEqualTo(200);
        assertThat(response.getBody()).matches("tenant-a/request-(\\d+) then tenant-a/request-\\1");
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            assertThat(budgets.budget("tenant-a").orElseThrow().children()).isEmpty();
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
            assertThat(output).contains("request POST /async-context ended with 1 buffer(s) of 4096 bytes still open in memory budget 'tenant-a/request-");
        });
    }

    /**
     * The timeout callbacks of a {@code DeferredResult} and a {@code WebAsyncTask}, which the container runs on one of
     * its threads outside every filter, run in the request's budget. Before, none was current there (the README said to
     * pass it along by hand).
     */
    @Test
    void timeoutCallbacksRunInTheRequestsBudget(CapturedOutput output) {
        for (String kind : new String[] {"deferred-timeout", "web-async-task-timeout"}) {
            ResponseEntity<String> response = post("/" + kind + "?bytes=4096");
            assertThat(response.getStatusCode().value()).as(kind).isEqualTo(200);
            assertThat(response.getBody()).as(kind).matches("tenant-a/request-(\\d+) then tenant-a/request-\\1");
            await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(output)
                    .contains("request POST /" + kind + " ended with 1 buffer(s) of 4096 bytes still open in memory budget 'tenant-a/request-"));
        }
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            assertThat(budgets.budget("tenant-a").orElseThrow().children()).isEmpty();
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
        });
    }

    @Test
    void aClientGoneMidStreamLeavesNoBudgetOpenNorMemoryHeld(CapturedOutput output) throws IOException {
        try (Socket client = new Socket("127.0.0.1", port)) {
            client.setSoTimeout(10_000);
            client.getOutputStream().write("POST /stream-until-gone HTTP/1.1\r\nHost: test\r\nX-Compute-Budget: tenant-a\r\nContent-Length: 0\r\n\r\n"
                    .getBytes(StandardCharsets.US_ASCII));
            assertThat(client.getInputStream().readNBytes(64 * 1024)).hasSize(64 * 1024); // the stream is under way
        }
        await().atMost(Duration.ofSeconds(20)).untilAsserted(() -> {
            MemoryBudget tenant = budgets.budget("tenant-a").orElseThrow();
            assertThat(tenant.children()).isEmpty();
            assertThat(tenant.statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
            assertThat(manager.statistics(MemoryLocation.HOST).heldBuffers()).isZero();
            assertThat(output).contains("request POST /stream-until-gone ended with 1 buffer(s) of 65536 bytes still open in memory budget 'tenant-a/request-");
        });
    }

    @RestController
    static class Work {

        private static String current() {
            return BudgetScope.current().map(MemoryBudget::path).orElse("none");
        }

        /** Allocates through the budget current where it runs, if any, and forgets the buffer. */
        private static String forgetting(String onRequest, long bytes) {
            BudgetScope.current().filter(budget -> bytes > 0).ifPresent(budget -> budget.allocate(bytes, MemoryLocation.HOST));
            return onRequest + " then " + current();
        }

        @PostMapping("/callable")
        Callable<String> callable(@RequestParam long bytes) {
            String onRequest = current();
            return () -> forgetting(onRequest, bytes);
        }

        @PostMapping("/web-async-task")
        WebAsyncTask<String> webAsyncTask(@RequestParam long bytes) {
            String onRequest = current();
            return new WebAsyncTask<>(10_000L, () -> forgetting(onRequest, bytes));
        }

        @PostMapping("/deferred-timeout")
        DeferredResult<String> deferredTimeout(@RequestParam long bytes) {
            String onRequest = current();
            DeferredResult<String> result = new DeferredResult<>(100L);
            result.onTimeout(() -> result.setResult(forgetting(onRequest, bytes)));
            return result;
        }

        @PostMapping("/web-async-task-timeout")
        WebAsyncTask<String> webAsyncTaskTimeout(@RequestParam long bytes) {
            String onRequest = current();
            CountDownLatch never = new CountDownLatch(1);
            WebAsyncTask<String> task = new WebAsyncTask<>(100L, () -> {
                try {
                    never.await(5, TimeUnit.SECONDS); // outlives the timeout
                } catch (InterruptedException cancelledAtTheTimeout) { // its result would race the timeout's
                    never.await(5, TimeUnit.SECONDS);
                }
                return "late";
            });
            task.onTimeout(() -> forgetting(onRequest, bytes));
            task.onCompletion(never::countDown);
            return task;
        }

        @PostMapping("/async-context")
        void asyncContext(HttpServletRequest request, @RequestParam long bytes) {
            String onRequest = current();
            AsyncContext async = request.startAsync();
            async.start(() -> {
                try {
                    async.getResponse().setContentType("text/plain");
                    async.getResponse().getWriter().write(forgetting(onRequest, bytes));
                } catch (IOException e) {
                    throw new UncheckedIOException(e);
                } finally {
                    async.complete();
                }
            });
        }

        /** Streams a viewed buffer, which it forgets, until the client is gone (a write fails) or 20 seconds pass. */
        @PostMapping("/stream-until-gone")
        StreamingResponseBody streamUntilGone() {
            return out -> {
                UnifiedBuffer buffer = BudgetScope.current().orElseThrow().allocate(64 * 1024, MemoryLocation.HOST);
                byte[] chunk = buffer.hostView().toArray(ValueLayout.JAVA_BYTE);
                long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
                while (System.nanoTime() < end) {
                    out.write(chunk);
                    out.flush();
                }
            };
        }

        @PostMapping("/streaming")
        StreamingResponseBody streaming(@RequestParam long bytes) {
            String onRequest = current();
            return out -> out.write(forgetting(onRequest, bytes).getBytes(StandardCharsets.UTF_8));
        }
    }

    @SpringBootConfiguration
    @EnableAutoConfigurationWithoutSecurity
    @Import(Work.class)
    static class Application {}
}
