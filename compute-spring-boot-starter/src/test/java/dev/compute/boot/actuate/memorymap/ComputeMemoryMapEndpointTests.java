package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.boot.ComputeMemoryAutoConfiguration;
import dev.compute.boot.actuate.ComputeMemoryStatisticsAutoConfiguration;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.endpoint.web.WebEndpointResponse;
import org.springframework.boot.autoconfigure.AutoConfigurations;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;

/** The page as one document, and when the endpoint that serves it is there. */
class ComputeMemoryMapEndpointTests {

    private final ApplicationContextRunner runner = new ApplicationContextRunner().withConfiguration(AutoConfigurations.of(
            ComputeMemoryAutoConfiguration.class, ComputeMemoryStatisticsAutoConfiguration.class, ComputeMemoryMapEndpointAutoConfiguration.class));

    @Test
    void thePageIsOneHtmlDocumentWithItsStyleSheetAndScriptInline() {
        WebEndpointResponse<String> page = new ComputeMemoryMapEndpoint().page();
        assertThat(page.getStatus()).isEqualTo(200);
        assertThat(page.getContentType()).hasToString("text/html;charset=UTF-8");
        assertThat(page.getBody()).startsWith("<!DOCTYPE html>").contains("<title>Compute memory map</title>")
                .contains("<style>\n:root {").contains(".segment-row {")
                .contains("<script>\n// The memory map page").contains("findEndpoint")
                .doesNotContain(ComputeMemoryMapEndpoint.STYLE_LINK).doesNotContain(ComputeMemoryMapEndpoint.SCRIPT_TAG)
                .doesNotContain("src=\"").doesNotContain("href=\"memory-map");
    }

    @Test
    void servedWhenExposedOverTheWebLikeEveryEndpoint() {
        runner.run(context -> assertThat(context).doesNotHaveBean(ComputeMemoryMapEndpoint.class));
        runner.withPropertyValues("management.endpoints.web.exposure.include=computememorymap")
                .run(context -> assertThat(context).hasSingleBean(ComputeMemoryMapEndpoint.class));
        runner.withPropertyValues("management.endpoints.web.exposure.include=computememorymap", "management.endpoint.computememorymap.access=NONE")
                .run(context -> assertThat(context).doesNotHaveBean(ComputeMemoryMapEndpoint.class));
        runner.withPropertyValues("management.endpoints.jmx.exposure.include=computememorymap", "spring.jmx.enabled=true")
                .run(context -> assertThat(context).as("a web page, not for JMX").doesNotHaveBean(ComputeMemoryMapEndpoint.class));
    }
}
