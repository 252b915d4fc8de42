package dev.compute.boot.test;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.scope.BudgetScope;
import dev.compute.memory.MemoryBudget;
import java.util.concurrent.Callable;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.webmvc.test.autoconfigure.WebMvcTest;
import org.springframework.context.annotation.Import;
import org.springframework.test.web.servlet.assertj.MockMvcTester;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;

/**
 * A controller in a web slice runs as it does in the application: its requests in the starter's scopes, so one whose
 * tenant the header names has a budget of its own.
 */
@WebMvcTest(properties = {"compute.scopes.request-budgets=true", "spring.test.compute.budgets.search.limit=8MB"})
@AutoConfigureComputeMemory
@Import(WebSliceScopesTests.Current.class)
class WebSliceScopesTests {

    @Autowired
    MockMvcTester mvc;

    @Test
    void aRequestNamingItsTenantRunsInABudgetOfItsOwnAsInTheApplication() {
        assertThat(mvc.get().uri("/current").header("X-Compute-Budget", "search")).hasStatusOk().bodyText().startsWith("search/request-");
        assertThat(mvc.get().uri("/current")).hasStatusOk().bodyText().isEqualTo("none");
    }

    /** MockMvc's asynchronous requests run through the request scope's wrapped request as through the container's. */
    @Test
    void anAsynchronousRequestCompletesAsInTheApplication() {
        assertThat(mvc.get().uri("/later")).hasStatusOk().bodyText().isEqualTo("later");
    }

    @RestController
    static class Current {
        @GetMapping("/current")
        String current() {
            return BudgetScope.current().map(MemoryBudget::path).orElse("none");
        }

        @GetMapping("/later")
        Callable<String> later() {
            return () -> "later";
        }
    }

    @SpringBootConfiguration
    static class Application {}
}
