package dev.compute.boot.actuate.endpoint;

import static org.assertj.core.api.Assertions.assertThat;
import static org.springframework.security.config.Customizer.withDefaults;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.memory.MemoryStatistics;
import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.security.autoconfigure.actuate.web.servlet.EndpointRequest;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.http.HttpHeaders;
import org.springframework.http.HttpStatusCode;
import org.springframework.http.MediaType;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.core.userdetails.User;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;
import org.springframework.web.client.RestClient;

/**
 * The trim operation over real HTTP, as a user's application gets it: unreachable until the endpoint is exposed,
 * not there until its access is raised from the default, read-only, refused to anonymous callers once Spring Security
 * is on the class path, and open to an operator under the configuration the README recommends.
 */
class ComputeMemoryEndpointHttpSafetyTests {

    private static final String ENDPOINT = "/actuator/computememory";

    /** Plain requests that report every status instead of throwing. */
    abstract static class HttpTest {
        @LocalServerPort
        int port;

        @Autowired
        UnifiedMemoryManager manager;

        RestClient http;

        @BeforeEach
        void client() {
            http = RestClient.builder().baseUrl("http://127.0.0.1:" + port).defaultStatusHandler(status -> true, (request, response) -> {}).build();
        }

        HttpStatusCode get(String path, String... basicAuth) {
            return http.get().uri(path).headers(headers -> auth(headers, basicAuth)).retrieve().toBodilessEntity().getStatusCode();
        }

        HttpStatusCode trim(String... basicAuth) {
            return http.post().uri(ENDPOINT).headers(headers -> auth(headers, basicAuth)).contentType(MediaType.APPLICATION_JSON)
                    .body("{\"all\": true}").retrieve().toBodilessEntity().getStatusCode();
        }

        /** Trims so far: a refused POST must not have reached the manager. */
        long trims() {
            return manager.statistics().values().stream().mapToLong(MemoryStatistics::trims).sum();
        }

        private static void auth(HttpHeaders headers, String... basicAuth) {
            if (basicAuth.length == 2) {
                headers.setBasicAuth(basicAuth[0], basicAuth[1]);
            }
        }
    }

    @Nested
    @SpringBootTest(classes = WithoutSecurity.class, webEnvironment = WebEnvironment.RANDOM_PORT)
    class DefaultExposure extends HttpTest {

        @Test
        void neitherTheSummaryNorTheTrimNorThePageIsMappedUntilTheUserExposesThem() {
            assertThat(get("/actuator/health").value()).as("the actuator itself is served").isEqualTo(200);
            assertThat(get(ENDPOINT).value()).isEqualTo(404);
            assertThat(get(ENDPOINT + "/host").value()).isEqualTo(404);
            assertThat(trim().value()).isEqualTo(404);
            assertThat(get("/actuator/computememorymap").value()).isEqualTo(404);
        }
    }

    @Nested
    @SpringBootTest(classes = WithoutSecurity.class, webEnvironment = WebEnvironment.RANDOM_PORT,
            properties = "management.endpoints.web.exposure.include=computememory")
    class ExposedAtItsDefaultAccess extends HttpTest {

        @Test
        void readsAreServedAndTheTrimIsNotThere() {
            long trims = trims();
            assertThat(get(ENDPOINT).value()).isEqualTo(200);
            assertThat(trim().value()).as("the write operation is opt-in").isEqualTo(405);
            assertThat(trims()).isEqualTo(trims);
        }
    }

    @Nested
    @SpringBootTest(classes = WithBootsDefaultSecurity.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
            "management.endpoints.web.exposure.include=computememory", "spring.security.user.name=admin", "spring.security.user.password=secret"})
    class ExposedUnderBootsDefaultSecurity extends HttpTest {

        @Test
        void anonymousCallersAreRefusedAndAnAuthenticatedReadWorks() {
            long trims = trims();
            assertThat(trim().value()).isEqualTo(401);
            assertThat(get(ENDPOINT).value()).isEqualTo(401);
            assertThat(get(ENDPOINT, "admin", "wrong").value()).isEqualTo(401);
            assertThat(get(ENDPOINT, "admin", "secret").value()).isEqualTo(200);
            // Boot's default chain keeps CSRF protection, so even an authenticated POST needs the configuration below.
            assertThat(trim("admin", "secret").value()).isIn(401, 403);
            assertThat(trims()).as("no refused POST trimmed").isEqualTo(trims);
        }
    }

    @Nested
    @SpringBootTest(classes = WithRecommendedSecurity.class, webEnvironment = WebEnvironment.RANDOM_PORT,
            properties = {"management.endpoints.web.exposure.include=health,computememory", "management.endpoint.computememory.access=unrestricted"})
    class ExposedUnderTheRecommendedSecurity extends HttpTest {

        @Test
        void onlyAnOperatorTrims() {
            long trims = trims();
            assertThat(trim().value()).isEqualTo(401);
            assertThat(trim("viewer", "viewer-secret").value()).as("authenticated without the role").isEqualTo(403);
            assertThat(trims()).as("no refused POST trimmed").isEqualTo(trims);
            assertThat(trim("operator", "operator-secret").value()).isEqualTo(200);
            assertThat(trims()).isGreaterThan(trims);
            assertThat(get(ENDPOINT, "operator", "operator-secret").value()).isEqualTo(200);
            assertThat(get(ENDPOINT + "/host").value()).isEqualTo(401);
            assertThat(get("/actuator/health").value()).as("health stays open to probes").isEqualTo(200);
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class WithoutSecurity {}

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class WithBootsDefaultSecurity {}

    /** The README's configuration: Actuator endpoints for the ACTUATOR role over HTTP Basic, health for everyone. */
    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class WithRecommendedSecurity {

        @Bean
        SecurityFilterChain actuatorSecurity(HttpSecurity http) throws Exception {
            http.securityMatcher(EndpointRequest.toAnyEndpoint())
                    .authorizeHttpRequests(requests -> requests
                            .requestMatchers(EndpointRequest.to("health")).permitAll()
                            .anyRequest().hasRole("ACTUATOR"))
                    .httpBasic(withDefaults())
                    // machine clients sending credentials on every call: no session, so no CSRF token to check
                    .csrf(csrf -> csrf.disable());
            return http.build();
        }

        @Bean
        InMemoryUserDetailsManager users() {
            return new InMemoryUserDetailsManager(
                    User.withUsername("operator").password("{noop}operator-secret").roles("ACTUATOR").build(),
                    User.withUsername("viewer").password("{noop}viewer-secret").roles("USER").build());
        }
    }
}
