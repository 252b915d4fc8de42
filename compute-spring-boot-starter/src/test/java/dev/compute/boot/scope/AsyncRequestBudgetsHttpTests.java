package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import jakarta.servlet.AsyncContext;
import jakarta.servlet.AsyncEvent;
import jakarta.servlet.AsyncListener;
import jakarta.servlet.DispatcherType;
import jakarta.servlet.http.HttpServlet;
import jakarta.servlet.http.HttpServletRequest;
import jakarta.servlet.http.HttpServletResponse;
import java.io.IOException;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
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
import org.springframework.boot.web.servlet.ServletRegistrationBean;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Import;
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.core.task.AsyncTaskExecutor;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.ExceptionHandler;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;
import org.springframework.web.context.request.async.AsyncRequestTimeoutException;
import org.springframework.web.context.request.async.DeferredResult;

/** Request budgets over real HTTP with asynchronous requests, errors, and tasks that throw. */
@ExtendWith(OutputCaptureExtension.class)
@SpringBootTest(classes = AsyncRequestBudgetsHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=64MB",
        "compute.budgets.tenant-a.limit=16MB", "compute.budgets.tenant-a.request-limit=4MB",
        "compute.scopes.request-budgets=true", "compute.scopes.task-budgets=true",
        "management.endpoints.web.exposure.include=health,computememory,prometheus", "management.endpoint.health.show-details=always"})
class AsyncRequestBudgetsHttpTests {

    static final long KiB = 1024;

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ComputeBudgets budgets;

    @Autowired
    Work work;

    RestClient http;

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
    }

    private ResponseEntity<String> post(String path) {
        return http.post().uri(path).header("X-Compute-Budget", "tenant-a").retrieve().toEntity(String.class);
    }

    private MemoryBudget tenant() {
        return budgets.budget("tenant-a").orElseThrow();
    }

    private void awaitTenantEmpty() {
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> {
            assertThat(tenant().children()).as("budgets left under the tenant").isEmpty();
            assertThat(tenant().statistics().allocatedBytes()).isZero();
            assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
        });
    }

    @Test
    void aCallableThatForgetsABufferHasItClosed(CapturedOutput output) {
        ResponseEntity<String> response = post("/callable?bytes=" + 4 * KiB);
        assertThat(response.getStatusCode().value()).isEqualTo(200);
        awaitTenantEmpty();
    }

    @Test
    void aDeferredResultThatCompletesLaterClosesTheRequestsBudgetThen(CapturedOutput output) {
        ResponseEntity<String> response = post("/deferred?bytes=" + 4 * KiB);
        assertThat(response.getStatusCode().value()).isEqualTo(200);
        assertThat(response.getBody()).contains("tenant-a/request-");
        awaitTenantEmpty();
        // the warning goes out once the budget is closed, its figures back to zero: awaited as they are
        await().atMost(Duration.ofSeconds(10)).untilAsserted(() -> assertThat(output).contains("still open in memory budget 'tenant-a/request-"));
    }

    @Test
    void aDeferredResultSetBeforeItIsReturned(CapturedOutput output) {
        ResponseEntity<String> response = post("/deferred-now?bytes=" + 4 * KiB);
        assertThat(response.getStatusCode().value()).isEqualTo(200);
        assertThat(response.getBody()).contains("tenant-a/request-");
        awaitTenantEmpty();
    }

    @Test
    void aDeferredResultThatTimesOutClosesTheBudget(CapturedOutput output) {
        ResponseEntity<String> response = post("/deferred-timeout?bytes=" + 4 * KiB);
        awaitTenantEmpty();
    }

    @Test
    void theDispatchAfterATimeoutStillRunsInTheOpenBudgetWhichClosesAsTheRequestEnds(CapturedOutput output) {
        ResponseEntity<String> response = post("/deferred-timeout-fallback?bytes=" + 4 * KiB);
        assertThat(response.getStatusCode().value()).isEqualTo(200);
        assertThat(response.getBody()).matches("fallback in tenant-a/request-\\d+");
        awaitTenantEmpty();
        await().atMost(Duration.ofSeconds(10))
                .untilAsserted(() -> assertThat(output).contains("request POST /deferred-timeout-fallback ended with 1 buffer(s) of 4096 bytes"));
    }

    /**
     * A listener that re-adds itself as the request starts its asynchronous cycle again (the Servlet spec's way to hear
     * every cycle) adds itself through the event's asynchronous context: that was the container's own, so the listener
     * heard the second cycle's timeout, on a container thread outside every filter, without the request's budget.
     */
    @Test
    void aListenerThatReAddsItselfAsTheRequestStartsAsyncAgainStillHearsItInTheRequestsBudget() {
        ResponseEntity<String> response = post("/restarted");
        assertThat(response.getBody()).as("the budget current in the listener's onTimeout, after the second startAsync")
                .matches("timeout in tenant-a/request-\\d+");
        awaitTenantEmpty();
    }

    @Test
    void aControllerThatThrowsHasItsBudgetClosed(CapturedOutput output) {
        ResponseEntity<String> response = post("/throw?bytes=" + 4 * KiB);
        assertThat(response.getStatusCode().value()).isEqualTo(500);
        awaitTenantEmpty();
        ResponseEntity<String> error = post("/throw-error?bytes=" + 4 * KiB);
        awaitTenantEmpty();
        // the next request without a tenant runs without a budget on whatever worker thread it gets
        for (int i = 0; i < 20; i++) {
            String none = http.get().uri("/current").retrieve().body(String.class);
            assertThat(none).isEqualTo("none");
        }
    }

    @Test
    void aTaskThatThrowsHasItsBudgetClosed(CapturedOutput output) throws Exception {
        ResponseEntity<String> response = post("/task-throws?bytes=" + 4 * KiB);
        awaitTenantEmpty();
    }

    @Test
    void requestsNeverBecomeMeters() {
        for (int i = 0; i < 30; i++) {
            post("/deferred-now?bytes=" + KiB);
        }
        String scrape = http.get().uri("/actuator/prometheus").retrieve().body(String.class);
        assertThat(scrape.lines().filter(l -> l.startsWith("compute_")).toList()).noneMatch(l -> l.contains("request-") || l.contains("task-"));
        Map<String, Object> health = http.get().uri("/actuator/health/compute").retrieve().body(new ParameterizedTypeReference<>() {});
    }

    @RestController
    static class Work {

        private final AsyncTaskExecutor executor;

        Work(AsyncTaskExecutor applicationTaskExecutor) {
            this.executor = applicationTaskExecutor;
        }

        @GetMapping("/current")
        String current() {
            return BudgetScope.current().map(MemoryBudget::path).orElse("none");
        }

        @PostMapping("/callable")
        Callable<String> callable(@RequestParam long bytes) {
            String onRequest = BudgetScope.current().map(MemoryBudget::path).orElse("none");
            return () -> {
                MemoryBudget budget = BudgetScope.current().orElseThrow(() -> new IllegalStateException("no budget in the callable"));
                budget.allocate(bytes, MemoryLocation.HOST); // forgotten
                return onRequest + " then " + budget.path();
            };
        }

        @PostMapping("/deferred")
        DeferredResult<String> deferred(@RequestParam long bytes) {
            MemoryBudget budget = BudgetScope.current().orElseThrow();
            budget.allocate(bytes, MemoryLocation.HOST); // forgotten
            DeferredResult<String> result = new DeferredResult<>(10_000L);
            CompletableFuture.delayedExecutor(200, TimeUnit.MILLISECONDS).execute(() -> result.setResult(budget.path()));
            return result;
        }

        @PostMapping("/deferred-now")
        DeferredResult<String> deferredNow(@RequestParam long bytes) {
            MemoryBudget budget = BudgetScope.current().orElseThrow();
            budget.allocate(bytes, MemoryLocation.HOST); // forgotten
            DeferredResult<String> result = new DeferredResult<>(10_000L);
            result.setResult(budget.path());
            return result;
        }

        @PostMapping("/deferred-timeout")
        DeferredResult<String> deferredTimeout(@RequestParam long bytes) {
            MemoryBudget budget = BudgetScope.current().orElseThrow();
            budget.allocate(bytes, MemoryLocation.HOST); // forgotten
            return new DeferredResult<>(300L);
        }

        @PostMapping("/throw")
        String fail(@RequestParam long bytes) {
            BudgetScope.current().orElseThrow().allocate(bytes, MemoryLocation.HOST);
            throw new IllegalStateException("the controller fails");
        }

        @PostMapping("/throw-error")
        String error(@RequestParam long bytes) {
            BudgetScope.current().orElseThrow().allocate(bytes, MemoryLocation.HOST);
            throw new AssertionError("the controller fails with an Error");
        }

        @PostMapping("/task-throws")
        String taskThrows(@RequestParam long bytes) throws Exception {
            AtomicReference<String> seen = new AtomicReference<>();
            var future = executor.submit(() -> {
                MemoryBudget budget = BudgetScope.current().orElseThrow();
                seen.set(budget.path());
                budget.allocate(bytes, MemoryLocation.HOST);
                throw new IllegalStateException("the task fails");
            });
            try {
                future.get(10, TimeUnit.SECONDS);
            } catch (Exception expected) {
                return seen.get() + " " + expected.getCause();
            }
            return "no failure";
        }
    }

    /** A request that times out answered by a fallback computed through its budget, on the dispatch after the timeout. */
    @RestController
    static class TimeoutFallback {

        @PostMapping("/deferred-timeout-fallback")
        DeferredResult<String> deferredTimeoutFallback() {
            return new DeferredResult<>(300L);
        }

        @ExceptionHandler(AsyncRequestTimeoutException.class)
        String fallback(HttpServletRequest request) {
            MemoryBudget budget = BudgetScope.current().orElseThrow();
            budget.allocate(Long.parseLong(request.getParameter("bytes")), MemoryLocation.HOST); // forgotten
            return "fallback in " + budget.path();
        }
    }

    /**
     * A servlet that starts its request's asynchronous cycle twice: the first dispatches at once, the second times out,
     * which its listener, re-added as the second cycle starts, answers with the budget current there.
     */
    static class RestartingServlet extends HttpServlet {

        @Override
        protected void doPost(HttpServletRequest request, HttpServletResponse response) {
            AsyncContext async = request.startAsync();
            if (request.getDispatcherType() == DispatcherType.REQUEST) {
                async.addListener(new ReAddingListener());
                async.dispatch();
            } else {
                async.setTimeout(200);
            }
        }
    }

    static class ReAddingListener implements AsyncListener {

        @Override
        public void onStartAsync(AsyncEvent event) {
            event.getAsyncContext().addListener(this);
        }

        @Override
        public void onTimeout(AsyncEvent event) throws IOException {
            event.getSuppliedResponse().getWriter().write("timeout in " + BudgetScope.current().map(MemoryBudget::path).orElse("none"));
            event.getAsyncContext().complete();
        }

        @Override
        public void onComplete(AsyncEvent event) {}

        @Override
        public void onError(AsyncEvent event) {}
    }

    @SpringBootConfiguration
    @EnableAutoConfigurationWithoutSecurity
    @Import({Work.class, TimeoutFallback.class})
    static class Application {

        @Bean
        ServletRegistrationBean<RestartingServlet> restartingServlet() {
            ServletRegistrationBean<RestartingServlet> registration = new ServletRegistrationBean<>(new RestartingServlet(), "/restarted");
            registration.setAsyncSupported(true);
            return registration;
        }
    }
}
