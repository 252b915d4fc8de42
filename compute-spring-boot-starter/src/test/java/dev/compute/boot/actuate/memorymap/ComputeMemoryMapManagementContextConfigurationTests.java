package dev.compute.boot.actuate.memorymap;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.List;
import org.junit.jupiter.api.Test;
import org.springframework.boot.actuate.autoconfigure.endpoint.web.WebEndpointProperties;
import org.springframework.boot.test.context.FilteredClassLoader;
import org.springframework.boot.test.context.runner.ApplicationContextRunner;
import org.springframework.boot.test.context.runner.WebApplicationContextRunner;
import org.springframework.core.io.ClassPathResource;
import org.springframework.mock.web.MockHttpServletRequest;
import org.springframework.web.servlet.function.RouterFunction;
import org.springframework.web.servlet.function.RouterFunctions;
import org.springframework.web.servlet.function.ServerRequest;
import org.springframework.web.servlet.function.ServerResponse;

/** When the page is served, and that its files are in the jar where the route looks for them. */
@SuppressWarnings("unchecked")
class ComputeMemoryMapManagementContextConfigurationTests {

    private final WebApplicationContextRunner web = new WebApplicationContextRunner()
            .withBean(WebEndpointProperties.class)
            .withUserConfiguration(ComputeMemoryMapManagementContextConfiguration.class);

    @Test
    void servedByDefaultInAServletApplication() {
        web.run(context -> assertThat(context).hasSingleBean(RouterFunction.class).hasBean("computeMemoryMapRouterFunction"));
    }

    @Test
    void servedWithoutActuatorsWebEndpointPropertiesBeanToo() {
        new WebApplicationContextRunner().withUserConfiguration(ComputeMemoryMapManagementContextConfiguration.class)
                .withPropertyValues("management.endpoints.web.base-path=/manage")
                .run(context -> {
                    RouterFunction<ServerResponse> route = context.getBean("computeMemoryMapRouterFunction", RouterFunction.class);
                    assertThat(route.route(request("/manage/computememory-map/"))).as("below the configured base path").isPresent();
                    assertThat(route.route(request("/manage/computememory-map/memory-map.js"))).isPresent();
                    assertThat(route.route(request("/actuator/computememory-map/"))).isEmpty();
                });
    }

    private static ServerRequest request(String path) {
        return ServerRequest.create(new MockHttpServletRequest("GET", path), List.of());
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
