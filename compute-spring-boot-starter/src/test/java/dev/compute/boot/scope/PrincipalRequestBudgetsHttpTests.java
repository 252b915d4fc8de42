package dev.compute.boot.scope;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeBudgets;
import dev.compute.memory.MemoryBudget;
import java.security.Principal;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.security.config.Customizer;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.web.bind.annotation.GetMapping;
import org.springframework.web.bind.annotation.RestController;
import org.springframework.web.client.RestClient;

/**
 * The README's own advice for a service whose callers cannot be trusted with a header: a {@link RequestBudgetResolver} of
 * the application's own that takes the tenant from the authenticated principal. Under Spring Security the principal is
 * known only once its filter chain has run, so the request budgets' filter must run after it.
 */
@SpringBootTest(classes = PrincipalRequestBudgetsHttpTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "compute.backend=cpu", "compute.memory.timeline.interval=0", "compute.budgets.search.limit=8MB", "compute.budgets.search.request-limit=1MB",
        "compute.scopes.request-budgets=true"})
class PrincipalRequestBudgetsHttpTests {

    @LocalServerPort
    int port;

    @Test
    void aRequestRunsInABudgetUnderTheTenantItsPrincipalNames() {
        RestClient http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).build();

        String budget = http.get().uri("/budget").headers(headers -> headers.setBasicAuth("search", "secret")).retrieve().body(String.class);

        assertThat(budget).startsWith("search/request-");
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Application {

        @Bean
        SecurityFilterChain security(HttpSecurity http) throws Exception {
            return http.authorizeHttpRequests(requests -> requests.anyRequest().authenticated()).httpBasic(Customizer.withDefaults()).build();
        }

        @Bean
        InMemoryUserDetailsManager users() {
            return new InMemoryUserDetailsManager(User.withUsername("search").password("{noop}secret").roles("USER").build());
        }

        /** The tenant is the authenticated user's name. */
        @Bean
        RequestBudgetResolver principalsBudget(@Autowired ComputeBudgets budgets) {
            return request -> {
                Principal principal = request.getUserPrincipal();
                return principal == null ? null : budgets.budget(principal.getName()).orElse(null);
            };
        }

        @RestController
        static class BudgetController {
            @GetMapping("/budget")
            String budget() {
                return BudgetScope.current().map(MemoryBudget::path).orElse("none");
            }
        }
    }
}
