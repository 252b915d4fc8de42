package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.EnableAutoConfigurationWithoutSecurity;
import dev.compute.boot.testing.HeadlessChromium;
import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import dev.compute.memory.ViewScope;
import java.nio.file.Path;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.SpringBootConfiguration;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.boot.test.context.SpringBootTest.WebEnvironment;
import org.springframework.boot.test.web.server.LocalServerPort;

/**
 * The page's figures add up while a closed buffer's memory waits for another thread's view: that memory is neither
 * allocated nor cached, and the page showed reserved bytes ("allocated + cached", its hint said) that the two fell
 * short of, with no figure for the rest.
 */
@SpringBootTest(classes = MemoryMapPageHeldMemoryTests.Application.class, webEnvironment = WebEnvironment.RANDOM_PORT, properties = {
        "management.endpoints.web.exposure.include=computememory,computememorymap", "compute.backend=cpu",
        "compute.memory.pooling.trim-interval=0", "compute.memory.timeline.interval=0"})
class MemoryMapPageHeldMemoryTests {

    @LocalServerPort
    int port;

    @Autowired
    UnifiedMemoryManager manager;

    record Shown(String held, String heldHint, String reservedHint) {}

    @Test
    void memoryHeldForAnotherThreadsViewHasAFigureOfItsOwn(@TempDir Path profile) throws InterruptedException {
        UnifiedBuffer viewed = manager.allocate(3 << 20, MemoryLocation.HOST);
        CountDownLatch holding = new CountDownLatch(1);
        CountDownLatch done = new CountDownLatch(1);
        Thread viewer = Thread.ofPlatform().start(() -> {
            try (ViewScope scope = ViewScope.open()) {
                viewed.hostView();
                holding.countDown();
                done.await(60, TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        });
        ChromeDriver browser = null;
        try {
            assertThat(holding.await(10, TimeUnit.SECONDS)).isTrue();
            viewed.close();
            browser = HeadlessChromium.start(profile, 1280, 800);
            // the page redraws its figures every 2 s: each look reads them at once, and looks again where they were replaced
            WebDriverWait wait = new WebDriverWait(browser, Duration.ofSeconds(20), Duration.ofMillis(100));
            wait.ignoring(StaleElementReferenceException.class);
            browser.get("http://127.0.0.1:" + port + "/actuator/computememorymap");

            Shown shown = wait.until(d -> {
                WebElement host = d.findElement(By.cssSelector("section.location[data-location='HOST'] dl.figures"));
                WebElement held = host.findElement(By.cssSelector("[data-figure='held']"));
                return new Shown(held.findElement(By.tagName("dd")).getText(), held.getDomAttribute("title"),
                        host.findElement(By.cssSelector("[data-figure='reserved']")).getDomAttribute("title"));
            });

            assertThat(shown.held()).isEqualTo("3.00 MiB");
            assertThat(shown.heldHint()).isEqualTo("1 closed buffer whose memory waits for another thread's view");
            assertThat(shown.reservedHint()).endsWith("allocated + cached + held");
        } finally {
            done.countDown();
            viewer.join(10_000);
            if (browser != null) {
                browser.quit();
            }
        }
    }

    @SpringBootConfiguration(proxyBeanMethods = false)
    @EnableAutoConfigurationWithoutSecurity
    static class Application {}
}
