package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import dev.compute.boot.ComputeBudgets;
import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.DeviceOutOfMemoryException;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
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
import org.springframework.core.ParameterizedTypeReference;
import org.springframework.core.task.AsyncTaskExecutor;
import org.springframework.http.HttpStatus;
import org.springframework.http.ResponseEntity;
import org.springframework.web.bind.annotation.PostMapping;
import org.springframework.web.bind.annotation.RequestParam;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;

/**
 * Two tenants from compute.budgets over real HTTP: every request runs in a budget of its own under the tenant its
 * header names, limited by the tenant's request-limit and closed as it ends (what it forgot is closed and logged); a
 * task it submits gets one too; the noisy tenant, allocating without pause, cannot take the memory the other reserved;
 * the endpoint shows both tenants and a request's budget under its tenant while it runs, health warns of the tenant
 * near its limit, and the meters carry the tenants' names and never a request's.
 */
@ExtendWith(OutputCaptureExtension.class)
@SpringBootTest(classes = TenantBudgetsHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.memory.pooling.max-pool-size=64MB",
        "compute.budgets.tenant-a.limit=16MB", "compute.budgets.tenant-a.reservations.host=8MB", "compute.budgets.tenant-a.request-limit=4MB",
        "compute.budgets.tenant-b.limit=64MB", "compute.budgets.tenant-b.request-limit=8MB",
        "compute.scopes.request-budgets=true", "compute.scopes.task-budgets=true", "compute.health.budget-warning-threshold=0.75",
        "management.endpoints.web.exposure.include=health,computememory,prometheus", "management.endpoint.health.show-details=always"})
class TenantBudgetsHttpTests {

    static final long MiB = 1L << 20;

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Autowired
    ComputeBudgets budgets;

    @Autowired
    Tenants tenants;

    RestClient http;

    @BeforeEach
    void client() {
        http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
    }

    @AfterEach
    void release() {
        tenants.release();
    }

    private ResponseEntity<Map<String, Object>> post(String tenant, String path) {
        return http.post().uri(path).header("X-Compute-Budget", tenant).retrieve().toEntity(new ParameterizedTypeReference<>() {});
    }

    private Map<String, Object> get(String path) {
        return http.get().uri(path).retrieve().body(new ParameterizedTypeReference<>() {});
    }

    private long held(String tenant) {
        return budgets.budget(tenant).orElseThrow().statistics().allocatedBytes();
    }

    @Test
    void eachRequestRunsInABudgetOfItsOwnUnderItsTenantAndWhatItForgotIsClosedAsItEnds(CapturedOutput output) {
        ResponseEntity<Map<String, Object>> a = post("tenant-a", "/allocate?bytes=" + MiB);
        ResponseEntity<Map<String, Object>> b = post("tenant-b", "/allocate?bytes=" + MiB);

        assertThat(a.getStatusCode()).isEqualTo(HttpStatus.OK);
        assertThat((String) a.getBody().get("budget")).matches("tenant-a/request-\\d+");
        assertThat(a.getBody()).as("counted in its tenant while it ran").containsEntry("tenantHeld", (int) MiB);
        assertThat((String) b.getBody().get("budget")).matches("tenant-b/request-\\d+");

        ResponseEntity<Map<String, Object>> forgetful = post("tenant-a", "/allocate?bytes=" + MiB + "&forget=true");
        assertThat(forgetful.getStatusCode()).isEqualTo(HttpStatus.OK);
        await().atMost(Duration.ofSeconds(5)).until(() -> held("tenant-a") == 0 && budgets.budget("tenant-a").orElseThrow().children().isEmpty());
        assertThat(manager.statistics(MemoryLocation.HOST).liveBuffers()).isZero();
        // the warning goes out once the budget is closed, its figures back to zero: awaited as they are
        await().atMost(Duration.ofSeconds(5)).untilAsserted(() -> assertThat(output).contains(
                "request POST /allocate ended with 1 buffer(s) of 1048576 bytes still open in memory budget '" + forgetful.getBody().get("budget") + "'"));

        ResponseEntity<Map<String, Object>> tooMuch = post("tenant-a", "/allocate?bytes=" + 5 * MiB);
        assertThat(tooMuch.getStatusCode()).isEqualTo(HttpStatus.INSUFFICIENT_STORAGE);
        assertThat((String) tooMuch.getBody().get("error")).as("the request's own limit, by name").matches(
                "(?s)out of HOST memory: memory budget 'tenant-a/request-\\d+' refused 5242880 bytes: .*of 4194304 bytes.*");

        ResponseEntity<Map<String, Object>> none = post("", "/allocate?bytes=" + MiB);
        assertThat(none.getBody()).as("no tenant, no budget").containsEntry("budget", "none");
    }

    @Test
    void aTaskTheRequestSubmitsRunsInABudgetOfItsOwnUnderTheTenant(CapturedOutput output) {
        ResponseEntity<Map<String, Object>> task = post("tenant-b", "/task?bytes=" + MiB);

        assertThat((String) task.getBody().get("budget")).matches("tenant-b/task-\\d+");
        await().atMost(Duration.ofSeconds(5)).until(() -> held("tenant-b") == 0);
        // the warning goes out once the budget is closed, its figures back to zero: awaited as they are
        await().atMost(Duration.ofSeconds(5)).untilAsserted(
                () -> assertThat(output).contains("still open in memory budget '" + task.getBody().get("budget") + "'"));
    }

    @Test
    void aNoisyTenantCannotTakeWhatTheOtherReservedAndTheObserversShowBoth() throws Exception {
        ResponseEntity<Map<String, Object>> noisy = post("tenant-b", "/fill?chunk=" + 2 * MiB);
        assertThat(noisy.getBody()).containsEntry("held", (int) (56 * MiB));
        assertThat((String) noisy.getBody().get("refusal")).contains("tenant-a reserves 8388608, holds 0")
                .contains("memory reserved for a budget is kept for it alone");

        assertThat(post("tenant-a", "/allocate?bytes=" + 4 * MiB).getStatusCode()).as("within its reservation").isEqualTo(HttpStatus.OK);

        CompletableFuture<ResponseEntity<Map<String, Object>>> running = CompletableFuture.supplyAsync(() -> post("tenant-a",
                "/allocate?bytes=" + MiB + "&wait=true"));
        assertThat(tenants.entered.await(10, TimeUnit.SECONDS)).isTrue();
        try {
            Map<String, Object> described = get("/actuator/computememory/default");
            List<Map<String, Object>> listed = list(described.get("budgets"));
            assertThat(listed).extracting(budget -> budget.get("name")).containsExactly("tenant-a", "tenant-b");
            assertThat(listed).allSatisfy(budget -> assertThat(budget).containsEntry("configured", true));
            assertThat(listed.getFirst()).containsEntry("budgetsUnder", 1).containsEntry("allocatedBytes", (int) MiB);
            Map<String, Object> host = map(map(described.get("locations")).get("HOST"));
            assertThat(((Number) host.get("reservationsCachedBytes")).longValue()).as("what tenant-a freed, kept for it")
                    .isPositive().isLessThanOrEqualTo(((Number) host.get("cachedBytes")).longValue());
            assertThat(list(listed.getFirst().get("budgets"))).singleElement().satisfies(request -> {
                assertThat((String) request.get("name")).matches("tenant-a/request-\\d+");
                assertThat(request).containsEntry("limitBytes", (int) (4 * MiB)).containsEntry("configured", false);
            });

            Map<String, Object> health = get("/actuator/health/compute");
            assertThat(map(map(health.get("details")).get("budgets"))).containsOnlyKeys("tenant-a", "tenant-b");
            assertThat((List<?>) map(health.get("details")).get("warnings")).anySatisfy(warning -> assertThat(warning.toString())
                    .startsWith("memory budget 'tenant-b' holds 88% of a limit"));

            String scrape = http.get().uri("/actuator/prometheus").retrieve().body(String.class);
            assertThat(scrape).contains("compute_memory_budget_allocated_bytes{backend=\"cpu\",budget=\"tenant-a\"")
                    .contains("budget=\"tenant-b\"").doesNotContain("budget=\"request-").doesNotContain("request-")
                    .contains("compute_memory_reservations_cached_bytes{");
        } finally {
            tenants.leave.countDown();
        }
        assertThat(running.get(10, TimeUnit.SECONDS).getStatusCode()).isEqualTo(HttpStatus.OK);
    }

    @SuppressWarnings("unchecked")
    private static List<Map<String, Object>> list(Object value) {
        return (List<Map<String, Object>>) value;
    }

    @SuppressWarnings("unchecked")
    private static Map<String, Object> map(Object value) {
        return (Map<String, Object>) value;
    }

    /** What the tenants' requests do with memory. */
    @RestController
    static class Tenants {

        private final ComputeBudgets budgets;
        private final AsyncTaskExecutor executor;
        private final List<UnifiedBuffer> kept = new ArrayList<>();
        final CountDownLatch entered = new CountDownLatch(1);
        final CountDownLatch leave = new CountDownLatch(1);

        Tenants(ComputeBudgets budgets, AsyncTaskExecutor applicationTaskExecutor) {
            this.budgets = budgets;
            this.executor = applicationTaskExecutor;
        }

        /** Allocates through the request's budget; forgets the buffer, or waits for the test, where asked. */
        @PostMapping("/allocate")
        ResponseEntity<Map<String, Object>> allocate(@RequestParam long bytes, @RequestParam(defaultValue = "false") boolean forget,
                @RequestParam(defaultValue = "false") boolean wait) throws InterruptedException {
            Optional<MemoryBudget> current = BudgetScope.current();
            if (current.isEmpty()) {
                return ResponseEntity.ok(Map.of("budget", "none"));
            }
            MemoryBudget budget = current.get();
            UnifiedBuffer buffer;
            try {
                buffer = budget.allocate(bytes, MemoryLocation.HOST);
            } catch (DeviceOutOfMemoryException e) {
                return ResponseEntity.status(HttpStatus.INSUFFICIENT_STORAGE).body(Map.of("error", e.getMessage()));
            }
            long tenantHeld = budget.parent().orElseThrow().statistics().allocatedBytes();
            if (wait) {
                entered.countDown();
                leave.await(10, TimeUnit.SECONDS);
            }
            if (!forget) {
                buffer.close();
            }
            return ResponseEntity.ok(Map.of("budget", budget.path(), "tenantHeld", tenantHeld));
        }

        /** A task that allocates through its own budget and forgets the buffer. */
        @PostMapping("/task")
        Map<String, Object> task(@RequestParam long bytes) throws Exception {
            return executor.submit(() -> {
                MemoryBudget budget = BudgetScope.current().orElseThrow();
                budget.allocate(bytes, MemoryLocation.HOST);
                return Map.<String, Object>of("budget", budget.path());
            }).get(10, TimeUnit.SECONDS);
        }

        /** The noisy tenant: holds through its own budget, across requests, as much as it is given, a chunk at a time. */
        @PostMapping("/fill")
        synchronized Map<String, Object> fill(@RequestParam long chunk) {
            MemoryBudget tenant = budgets.budget("tenant-b").orElseThrow();
            while (true) {
                try {
                    kept.add(tenant.allocate(chunk, MemoryLocation.HOST));
                } catch (DeviceOutOfMemoryException e) {
                    return Map.of("held", tenant.statistics().allocatedBytes(), "refusal", e.getMessage());
                }
            }
        }

        synchronized void release() {
            kept.forEach(UnifiedBuffer::close);
            kept.clear();
        }
    }

    @SpringBootConfiguration
    @EnableAutoConfigurationWithoutSecurity
    @Import(Tenants.class)
    static class Application {}
}
