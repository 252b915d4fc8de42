package dev.compute.boot;

import static org.assertj.core.api.Assertions.assertThat;

import dev.compute.memory.UnifiedMemoryManager;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;
import org.springframework.boot.WebApplicationType;
import org.springframework.boot.autoconfigure.EnableAutoConfiguration;
import org.springframework.boot.builder.SpringApplicationBuilder;
import org.springframework.boot.test.system.CapturedOutput;
import org.springframework.boot.test.system.OutputCaptureExtension;
import org.springframework.context.ConfigurableApplicationContext;
import org.springframework.context.annotation.Configuration;

/**
 * What the manager logs while a context closes reaches the application's log under Spring Boot's default logging.
 * Boot removes its bridge from {@code java.util.logging} on {@code ContextClosedEvent}, before beans are destroyed;
 * the starter's SLF4J {@code System.LoggerFinder} does not go through that bridge. {@code StarterAloneTests} proves the
 * same in a JVM of its own, on the class path of an application whose one dependency is the starter.
 */
@ExtendWith(OutputCaptureExtension.class)
class ShutdownReportTests {

    @Test
    void buffersLeftOpenAreReportedInTheApplicationsLogWhenTheContextCloses(CapturedOutput output) {
        ConfigurableApplicationContext context = new SpringApplicationBuilder(Application.class).web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "compute.backend=cpu", "compute.memory.leak-detection=paranoid").run();
        context.getBean(UnifiedMemoryManager.class).allocate(4096); // left open
        int before = output.length();

        context.close();

        String closing = output.toString().substring(before);
        // Boot's console pattern (level, then the logger's abbreviated name), whichever context of this JVM set it up
        assertThat(closing).containsPattern("(?m)^\\S+\\s+WARN .* d\\.compute\\.memory\\.UnifiedMemoryManager\\s+: "
                + "UnifiedMemoryManager 'default' closed with 1 buffer\\(s\\) still open;")
                .contains("ShutdownReportTests.buffersLeftOpenAreReportedInTheApplicationsLogWhenTheContextCloses(ShutdownReportTests.java");
        assertThat(closing).as("every line the library writes while the context closes is the application's, none java.util.logging's")
                .doesNotContain("WARNING:", "INFO:");
    }

    @Test
    void eachNamedManagersReportSaysWhichManagerItIs(CapturedOutput output) {
        ConfigurableApplicationContext context = new SpringApplicationBuilder(Application.class).web(WebApplicationType.NONE)
                .properties("spring.main.banner-mode=off", "compute.managers.a.backend=cpu", "compute.managers.b.backend=cpu").run();
        context.getBean("bUnifiedMemoryManager", UnifiedMemoryManager.class).allocate(4096); // left open on b only
        int before = output.length();

        context.close();

        assertThat(output.toString().substring(before)).contains("UnifiedMemoryManager 'b' closed with 1 buffer(s) still open;")
                .doesNotContain("UnifiedMemoryManager 'a' closed");
    }

    @Configuration(proxyBeanMethods = false)
    @EnableAutoConfiguration
    static class Application {}
}
