package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointProperties;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.core.io.ClassPathResource;
import org.springframework.web.servlet.function.RouterFunction;
import org.springframework.web.servlet.function.RouterFunctions;

/** When the page is served, and that its files are in the jar where the route looks for them. */
class ComputeMemoryMapManagementContextConfigurationTests {

    private final WebApplicationContextRunner web = new WebApplicationContextRunner()
            .withBean(WebEndpointProperties.class)
            .withUserConfiguration(ComputeMemoryMapManagementContextConfiguration.class);

    @Test
    void servedByDefaultInAServletApplication() {
        web.run(context -> assertThat(context).hasSingleBean(RouterFunction.class).hasBean("computeMemoryMapRouterFunction"));
    }

    @Test
    void switchedOffByTheProperty() {
        web.withPropertyValues("compute.memory-map.enabled=false")
                .run(context -> assertThat(context).doesNotHaveBean(RouterFunction.class));
    }

    @Test
    void absentWithoutSpringMvcOrOutsideAWebApplication() {
        web.withClassLoader(new FilteredClassLoader(RouterFunctions.class))
                .run(context -> assertThat(context).doesNotHaveBean(RouterFunction.class));
        new ApplicationContextRunner().withBean(WebEndpointProperties.class)
                .withUserConfiguration(ComputeMemoryMapManagementContextConfiguration.class)
                .run(context -> assertThat(context).doesNotHaveBean(RouterFunction.class));
    }

    @Test
    void thePageAndItsFilesAreInTheJar() {
        for (String file : new String[] {"index.html", "memory-map.js", "memory-map.css"}) {
            assertThat(new ClassPathResource(ComputeMemoryMapManagementContextConfiguration.LOCATION + file).exists()).as(file).isTrue();
        }
    }
}
