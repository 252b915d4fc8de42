package dev.compute.sample;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.MemoryLocation;
import dev.compute.memory.UnifiedBuffer;
import dev.compute.memory.UnifiedMemoryManager;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;
import org.openqa.selenium.By;
import org.openqa.selenium.Dimension;
import org.openqa.selenium.OutputType;
import org.openqa.selenium.StaleElementReferenceException;
import org.openqa.selenium.WebElement;
import org.openqa.selenium.chrome.ChromeDriver;
import org.openqa.selenium.interactions.Actions;
import org.openqa.selenium.support.ui.WebDriverWait;
import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.beans.factory.annotation.Value;
import org.springframework.http.MediaType;
import org.springframework.web.client.RestClient;

/**
 * The memory map page in a real headless Chromium against the running sample: it loads from the starter's jar, finds
 * the endpoint, draws the segment of a buffer this test allocated (with its allocation site on hover), shows the block
 * free once the buffer is closed, and its trim button gives the cache back. Screenshots go to
 * {@code target/memory-map.png} (under load, the test's block hovered) and {@code target/memory-map-freed.png}.
 */
@SampleServiceTest
class MemoryMapPageBrowserTests {

    /** Larger than anything the load generator asks for (sample.load.max-buffer-size is 4MB), so its block is ours. */
    private static final long BUFFER_BYTES = 5L * 1024 * 1024 + 4321;

    private static final MemoryLocation LOCATION = MemoryLocation.UNIFIED;

    @Value("${local.server.port}")
    int port;

    @Autowired
    UnifiedMemoryManager memory;

    @TempDir
    Path profile;

    private ChromeDriver browser;

    private WebDriverWait wait;

    @BeforeEach
    void openBrowser() {
        browser = HeadlessChromium.start(profile, 1280, 1000);
        wait = new WebDriverWait(browser, Duration.ofSeconds(20), Duration.ofMillis(200));
        wait.ignoring(StaleElementReferenceException.class);
    }

    @AfterEach
    void closeBrowser() {
        if (browser != null) {
            browser.quit();
        }
    }

    @Test
    void drawsTheSegmentOfABufferLiveThenFreeAfterClose() throws Exception {
        browser.get("http://127.0.0.1:" + port + "/actuator/computememorymap");
        wait.until(d -> d.findElement(By.id("device")).getText().startsWith("backend "));
        assertThat(browser.findElement(By.id("leaks")).getText()).as("the endpoint's leak count").matches("\\d+ leaks? detected");
        assertThat(browser.findElement(By.id("message")).isDisplayed()).isFalse();
        assertThat(browser.findElements(By.cssSelector("section.location"))).extracting(s -> s.getDomAttribute("data-location"))
                .containsExactlyElementsOf(memory.locations().stream().map(Enum::name).toList());
        wait.until(d -> d.findElement(By.id("trim")).isDisplayed());   // the sample exposes the write operation

        RestClient sample = RestClient.create("http://127.0.0.1:" + port);
        Map<String, String> block;
        try (UnifiedBuffer buffer = memory.allocate(BUFFER_BYTES, LOCATION)) {
            String ours = "section[data-location=" + LOCATION + "] .block[data-state=LIVE][data-requested=\"" + BUFFER_BYTES + "\"]";
            WebElement live = wait.until(d -> d.findElement(By.cssSelector(ours)));
            block = Map.of("segment", live.getDomAttribute("data-segment"), "offset", live.getDomAttribute("data-offset"));
            assertThat(Long.parseLong(live.getDomAttribute("data-size"))).isGreaterThanOrEqualTo(BUFFER_BYTES);
            assertThat(live.getSize().getWidth()).as("drawn to scale: a 5 MiB block is wide").isGreaterThan(20);

            // hovering shows size, state and where the block was allocated (the sample runs with paranoid leak detection)
            new Actions(browser).moveToElement(wait.until(d -> d.findElement(By.cssSelector(ours)))).perform();
            WebElement tooltip = wait.until(d -> d.findElement(By.id("tooltip")).isDisplayed() ? d.findElement(By.id("tooltip")) : null);
            assertThat(tooltip.getText()).contains("LIVE").contains(LOCATION + " segment " + block.get("segment"))
                    .contains(String.format("requested %,d B", BUFFER_BYTES))
                    .contains("MemoryMapPageBrowserTests.drawsTheSegmentOfABufferLiveThenFreeAfterClose");

            // the picture for the README: the sample under load, our block hovered
            sample.post().uri("/api/load/start").contentType(MediaType.APPLICATION_JSON).retrieve().toBodilessEntity();
            try {
                Thread.sleep(4500);
                fitWindowToPage();
                new Actions(browser).moveToElement(wait.until(d -> d.findElement(By.cssSelector(ours)))).perform();
                wait.until(d -> d.findElement(By.id("tooltip")).isDisplayed());
                screenshot("memory-map.png");
            } finally {
                sample.post().uri("/api/load/stop").contentType(MediaType.APPLICATION_JSON).retrieve().toBodilessEntity();
            }
        }

        // closed: once the page has drawn data asked for after the close, the same place in the same segment is a cached
        // free block (the trim interval is minutes away, so the pool keeps it)
        long closed = System.currentTimeMillis();
        wait.until(d -> Long.parseLong(d.findElement(By.tagName("body")).getDomAttribute("data-fetched")) > closed);
        String same = "section[data-location=" + LOCATION + "] .segment[data-segment=\"" + block.get("segment") + "\"] .block";
        assertThat(stateAt(browser.findElements(By.cssSelector(same)), Long.parseLong(block.get("offset"))))
                .as("the block at %s", block).isEqualTo("FREE");
        assertThat(browser.findElements(By.cssSelector(".block[data-requested=\"" + BUFFER_BYTES + "\"]")))
                .extracting(b -> b.getDomAttribute("data-state") + " " + b.getDomAttribute("data-segment") + " " + b.getDomAttribute("data-offset"))
                .isEmpty();
        screenshot("memory-map-freed.png");

        // the trim button gives all cached memory back: the free block goes with it
        browser.findElement(By.id("release")).click();
        wait.until(d -> d.findElement(By.id("trim-result")).getText().startsWith("released "));
        wait.until(d -> !stateAt(d.findElements(By.cssSelector(same)), Long.parseLong(block.get("offset"))).equals("FREE"));
    }

    /** The state of the block covering {@code offset}, or "none" where no block covers it (the segment is gone). */
    private static String stateAt(List<WebElement> blocks, long offset) {
        for (WebElement block : blocks) {
            long start = Long.parseLong(block.getDomAttribute("data-offset"));
            long size = Long.parseLong(block.getDomAttribute("data-size"));
            if (offset >= start && offset < start + size) {
                return block.getDomAttribute("data-state");
            }
        }
        return "none";
    }

    private void fitWindowToPage() {
        Number height = (Number) browser.executeScript("return document.documentElement.scrollHeight;");
        browser.manage().window().setSize(new Dimension(1280, Math.min(4000, height.intValue() + 140)));
    }

    private void screenshot(String name) throws Exception {
        Path target = Path.of("target", name);
        Files.createDirectories(target.getParent());
        Files.copy(browser.getScreenshotAs(OutputType.FILE).toPath(), target, StandardCopyOption.REPLACE_EXISTING);
        assertThat(Files.size(target)).isGreaterThan(10_000);
    }
}
