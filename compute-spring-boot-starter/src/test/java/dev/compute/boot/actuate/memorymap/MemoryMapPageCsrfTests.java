package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.testing.HeadlessChromium;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Path;
import java.time.Duration;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.security.autoconfigure.actuate.web.servlet.EndpointRequest;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;
import org.springframework.context.annotation.Bean;
import org.springframework.security.config.annotation.web.builders.HttpSecurity;
import org.springframework.security.provisioning.InMemoryUserDetailsManager;
import org.springframework.security.web.SecurityFilterChain;

/**
 * The memory map page's trim buttons under Spring Security with CSRF protection on, as the starter's README configures
 * it for a browser (the actuator's chain with {@code csrf.spa()}: the token in the {@code XSRF-TOKEN} cookie, checked in
 * the {@code X-XSRF-TOKEN} header): the page sends the token, so the trim runs rather than getting a 403.
 */
@SpringBootTest(classes = MemoryMapPageCsrfTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=computememory,computememorymap", "management.endpoint.computememory.access=unrestricted",
        "compute.backend=cpu", "compute.memory.pooling.trim-interval=0"})
class MemoryMapPageCsrfTests {

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    @Test
    void theReleaseButtonSendsTheCsrfTokenAndReleasesTheCache(@TempDir Path profile) {
        manager.allocate(1L << 20, MemoryLocation.HOST).close(); // cached memory to release
        assertThat(manager.statistics(MemoryLocation.HOST).cachedBytes()).isPositive();
        ChromeDriver browser = HeadlessChromium.start(profile, 1280, 800);
        try {
            WebDriverWait wait = new WebDriverWait(browser, Duration.ofSeconds(20), Duration.ofMillis(100));
            browser.get("http://127.0.0.1:" + port + "/actuator/computememorymap");
            wait.until(d -> d.findElement(By.id("release")).isDisplayed());

            browser.findElement(By.id("release")).click();

            String result = wait.until(d -> {
                String text = d.findElement(By.id("trim-result")).getText();
                return text.startsWith("released ") || text.startsWith("trim ") ? text : null;
            });
            assertThat(result).as("what the page says of its POST").startsWith("released ");
            assertThat(manager.statistics(MemoryLocation.HOST).cachedBytes()).isZero();
        } finally {
            browser.quit();
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Application {

        /** The actuator open to anyone (this test is about CSRF, not who may trim), with CSRF checked as for a browser's session. */
        @Bean
        SecurityFilterChain actuatorSecurity(HttpSecurity http) throws Exception {
            http.securityMatcher(EndpointRequest.toAnyEndpoint())
                    .authorizeHttpRequests(requests -> requests.anyRequest().permitAll())
                    .csrf(csrf -> csrf.spa());
            return http.build();
        }

        /** Users of its own (none), so that Spring Boot logs no generated password. */
        @Bean
        InMemoryUserDetailsManager users() {
            return new InMemoryUserDetailsManager();
        }
    }
}
