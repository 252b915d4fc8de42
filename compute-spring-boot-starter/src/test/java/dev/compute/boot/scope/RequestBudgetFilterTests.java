package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import jakarta.servlet.DispatcherType;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.atomic.AtomicReference;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.mock.web.MockAsyncContext;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.mock.web.MockHttpServletResponse;

/** A request's own budget: made under its tenant's, current while it runs, closed as it ends with what it forgot. */
@ExtendWith(OutputCaptureExtension.class)
class RequestBudgetFilterTests {

    private final UnifiedMemoryManager manager = UnifiedMemoryManager.builder().backend("cpu").build();
    private final ComputeBudgets budgets = new ComputeBudgets();
    private final MemoryBudget tenant = manager.budget("tenant-a", 8 << 20);
    private final RequestBudgetFilter filter;

    RequestBudgetFilterTests() {
        budgets.add("default", tenant, 1 << 20);
        filter = new RequestBudgetFilter(new HeaderRequestBudgetResolver(budgets, "X-Compute-Budget"), new ScopedBudgets(budgets));
    }

    @AfterEach
    void close() {
        manager.close();
    }

    private static MockHttpServletRequest request(String tenant) {
        MockHttpServletRequest request = new MockHttpServletRequest("POST", "/score");
        if (tenant != null) {
            request.addHeader("X-Compute-Budget", tenant);
        }
        return request;
    }

    @Test
    void theRequestRunsInABudgetOfItsOwnUnderItsTenantAndWhatItForgotIsClosedAndLogged(CapturedOutput output) throws Exception {
        AtomicReference<MemoryBudget> during = new AtomicReference<>();
        List<UnifiedBuffer> forgotten = new ArrayList<>();
        filter.doFilter(request("tenant-a"), new MockHttpServletResponse(), (request, response) -> {
            MemoryBudget budget = BudgetScope.current().orElseThrow();
            during.set(budget);
            forgotten.add(budget.allocate(4096, MemoryLocation.HOST));
            budget.allocate(4096, MemoryLocation.HOST).close();
            assertThat(tenant.statistics().allocatedBytes()).as("counted in its tenant").isEqualTo(4096);
        });

        assertThat(during.get().path()).matches("tenant-a/request-\\d+");
        assertThat(during.get().limitBytes()).as("the tenant's request-limit").isEqualTo(1 << 20);
        assertThat(during.get().isClosed()).isTrue();
        assertThat(forgotten.getFirst().isClosed()).isTrue();
        assertThat(tenant.statistics().allocatedBytes()).isZero();
        assertThat(tenant.children()).isEmpty();
        assertThat(BudgetScope.current()).isEmpty();
        assertThat(output).contains("request POST /score ended with 1 buffer(s) of 4096 bytes still open in memory budget '" + during.get().path() + "'");
    }

    @Test
    void aRequestWithoutATenantOrWithAnUnknownOneRunsWithoutABudget() throws Exception {
        for (String named : new String[] {null, "nobody", "default/nobody", "other/tenant-a"}) {
            AtomicReference<Boolean> current = new AtomicReference<>();
            filter.doFilter(request(named), new MockHttpServletResponse(), (request, response) -> current.set(BudgetScope.current().isPresent()));
            assertThat(current.get()).as("%s", named).isFalse();
        }
        filter.doFilter(request("default/tenant-a"), new MockHttpServletResponse(), (request, response) -> assertThat(BudgetScope.current()).isPresent());
    }

    /**
     * A tenant the application closed (one it added itself, which left) while a gateway still names it: the request
     * runs in the closed tenant, which refuses what it allocates with the tenant's name, rather than fail in the
     * filter with a server error, or run with no budget at all and pass the tenant's limit.
     */
    @Test
    void aRequestNamingAClosedTenantRunsInItAndItsAllocationsAreRefused() throws Exception {
        tenant.close();
        AtomicReference<MemoryBudget> during = new AtomicReference<>();
        filter.doFilter(request("tenant-a"), new MockHttpServletResponse(), (request, response) -> {
            during.set(BudgetScope.current().orElseThrow());
            assertThatThrownBy(() -> during.get().allocate(4096, MemoryLocation.HOST)).isInstanceOf(IllegalStateException.class)
                    .hasMessageContaining("tenant-a");
        });
        assertThat(during.get()).isSameAs(tenant);
        assertThat(BudgetScope.current()).isEmpty();
        assertThat(manager.liveBuffers()).isEmpty();
    }

    @Test
    void anAsynchronousRequestKeepsItsBudgetForItsLaterDispatchesAndClosesItWhenItCompletes() throws Exception {
        MockHttpServletRequest request = request("tenant-a");
        request.setAsyncSupported(true);
        MockHttpServletResponse response = new MockHttpServletResponse();
        AtomicReference<MemoryBudget> first = new AtomicReference<>();
        filter.doFilter(request, response, (in, out) -> {
            first.set(BudgetScope.current().orElseThrow());
            in.startAsync();
        });
        assertThat(first.get().isClosed()).as("open while the request is asynchronous").isFalse();

        request.setDispatcherType(DispatcherType.ASYNC);
        AtomicReference<MemoryBudget> later = new AtomicReference<>();
        filter.doFilter(request, response, (in, out) -> later.set(BudgetScope.current().orElseThrow()));
        assertThat(later.get()).isSameAs(first.get());

        ((MockAsyncContext) request.getAsyncContext()).complete();
        assertThat(first.get().isClosed()).isTrue();
    }

    @Test
    void theFilterRunsRightAfterSecuritysWhateverItsOrderButNeverBeforeTheViewScope() {
        assertThat(ComputeScopesAutoConfiguration.requestBudgetOrder(-100)).isEqualTo(-99);
        assertThat(ComputeScopesAutoConfiguration.requestBudgetOrder(Integer.MAX_VALUE)).as("no overflow to the first place").isEqualTo(Integer.MAX_VALUE);
        assertThat(ComputeScopesAutoConfiguration.requestBudgetOrder(Integer.MIN_VALUE)).as("the view scope's filter runs first")
                .isEqualTo(Integer.MIN_VALUE + 1);
    }
}
