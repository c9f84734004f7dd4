#include "seqpar/reports/report_document.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "seqpar/reports/base64.hpp"

namespace seqpar::reports {

void Section::paragraph(std::string text) { blocks.push_back({Block::Kind::paragraph, std::move(text), {}, {}, {}}); }
void Section::add_table(Table t) { blocks.push_back({Block::Kind::table, {}, std::move(t), {}, {}}); }
void Section::image(std::string file, std::string caption) {
  blocks.push_back({Block::Kind::image, std::move(caption), {}, std::move(file), {}});
}
void Section::list(std::vector<std::string> items) { blocks.push_back({Block::Kind::list, {}, {}, {}, std::move(items)}); }

namespace {

std::string md_cell(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += c;
    }
  }
  return out;
}

}  // namespace

std::string render_markdown(const Document& doc) {
  std::string out = "# " + doc.title + "\n";
  for (const auto& s : doc.sections) {
    out += "\n## " + s.title + "\n";
    for (const auto& b : s.blocks) {
      out += "\n";
      if (b.kind == Block::Kind::paragraph) {
        out += b.text + "\n";
      } else if (b.kind == Block::Kind::list) {
        for (const auto& item : b.items) out += "- " + md_cell(item) + "\n";
      } else if (b.kind == Block::Kind::image) {
        out += fmt::format("![{}]({})\n\n*{}*\n", b.image_file, b.image_file, b.text);
      } else {
        out += "|";
        for (const auto& h : b.table.header) out.append(" ").append(md_cell(h)).append(" |");
        out += "\n|";
        for (std::size_t i = 0; i < b.table.header.size(); ++i) out += "---|";
        out += "\n";
        for (const auto& row : b.table.rows) {
          out += "|";
          for (const auto& c : row) out.append(" ").append(md_cell(c)).append(" |");
          out += "\n";
        }
      }
    }
  }
  return out;
}

std::string render_html(const Document& doc, const std::string& dir) {
  std::string out = fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>{}</title>\n<style>\n"
      "body {{ font-family: sans-serif; max-width: 1200px; margin: 2em auto; padding: 0 1em; color: #222; }}\n"
      "table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }}\n"
      "th, td {{ border: 1px solid #bbb; padding: 0.25em 0.6em; text-align: left; }}\n"
      "th {{ background: #eee; }}\nimg {{ max-width: 100%; }}\nfigcaption {{ font-style: italic; color: #555; }}\n"
      "</style>\n</head>\n<body>\n<h1>{}</h1>\n",
      html_escape(doc.title), html_escape(doc.title));
  for (const auto& s : doc.sections) {
    out += "<h2>" + html_escape(s.title) + "</h2>\n";
    for (const auto& b : s.blocks) {
      if (b.kind == Block::Kind::paragraph) {
        out += "<p>" + html_escape(b.text) + "</p>\n";
      } else if (b.kind == Block::Kind::list) {
        out += "<ul>\n";
        for (const auto& item : b.items) out += "<li>" + html_escape(item) + "</li>\n";
        out += "</ul>\n";
      } else if (b.kind == Block::Kind::image) {
        std::ifstream in(std::filesystem::path(dir) / b.image_file, std::ios::binary);
        if (!in) {
          out += "<p>(plot " + html_escape(b.image_file) + " is missing)</p>\n";
          continue;
        }
        std::stringstream ss;
        ss << in.rdbuf();
        out += "<figure><img alt=\"" + html_escape(b.text) + "\" src=\"data:image/png;base64," +
               base64_encode(ss.str()) + "\"><figcaption>" + html_escape(b.text) + "</figcaption></figure>\n";
      } else {
        out += "<table>\n<tr>";
        for (const auto& h : b.table.header) out += "<th>" + html_escape(h) + "</th>";
        out += "</tr>\n";
        for (const auto& row : b.table.rows) {
          out += "<tr>";
          for (const auto& c : row) out += "<td>" + html_escape(c) + "</td>";
          out += "</tr>\n";
        }
        out += "</table>\n";
      }
    }
  }
  out += "</body>\n</html>\n";
  return out;
}

}  // namespace seqpar::reports
